package proxy

import (
	"errors"

	"github.com/cloudwego/netpoll"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/relay"
)

// closeOnError closes the pair for an error met while relaying from side
// ("client" or "upstream"), counting and logging it by kind. Two sides (or
// the overflow sweep) may fail at once; only the call that closes the pair
// counts.
func (p *pair) closeOnError(side string, err error) {
	if p.closed.Load() {
		return
	}
	var size *framing.SizeError
	var mismatch *correlate.MismatchError
	var cw errClientWrite
	var uw errUpstreamWrite
	var pc relay.PolicyCloseError
	var unreadable relay.SaslUnreadableError
	m := p.s.m
	var count prometheus.Counter // counted once the pair is closed by this call
	reason := side + " error"
	switch {
	case errors.As(err, &size):
		count, reason = m.oversize.WithLabelValues(side), side+" frame refused: "+size.Error()
	case errors.As(err, &mismatch):
		count, reason = m.protocolErrs.WithLabelValues("correlation_mismatch"), "correlation id mismatch"
		p.log.Error().Int32("upstream_id", mismatch.Got).Int32("expected_upstream_id", mismatch.Want).
			Int32("client_id", mismatch.ClientID).Msg("response does not match the oldest request in flight")
	case errors.Is(err, correlate.ErrUnexpectedResponse):
		count, reason = m.protocolErrs.WithLabelValues("unexpected_response"), "upstream sent a response with nothing in flight"
	case errors.As(err, &unreadable):
		count, reason = m.protocolErrs.WithLabelValues("sasl_unreadable_request"), unreadable.Error()
	case errors.Is(err, framing.ErrMalformed):
		count, reason = m.protocolErrs.WithLabelValues("malformed_"+side), side+" sent a malformed frame"
	case errors.As(err, &pc):
		reason = "policy: " + pc.Error()
		if p.close(reason, err) {
			if eng := p.s.policies.Load(); eng != nil {
				eng.Closed(pc.Verdict.Rule)
			}
		}
		return
	case errors.Is(err, relay.ErrOverflow):
		count, reason = m.overflow.WithLabelValues(side), side+" sent more than max_unread_bytes ahead"
	case errors.Is(err, errOverBudget):
		count, reason = m.overBudget.WithLabelValues(side), side+" input over max_buffered_bytes"
	case errors.Is(err, errSlowOverBudget):
		count, reason = m.overBudget.WithLabelValues(side), side+" reads too slowly: the batch kept for it is the largest over max_buffered_bytes"
	case errors.Is(err, errWriteStalled):
		count, reason = m.writeStalls.WithLabelValues(side), side+" write stalled"
	case errors.Is(err, netpoll.ErrReadTimeout):
		reason = side + " stalled inside a frame past read_timeout"
	case errors.As(err, &cw):
		reason, err = reasonClientClosed, cw.error
	case errors.As(err, &uw):
		reason, err = reasonUpstreamClosed, uw.error
	case errors.Is(err, correlate.ErrClosed), errors.Is(err, netpoll.ErrEOF), errors.Is(err, netpoll.ErrConnClosed):
		reason, err = side+" closed", nil
	}
	if p.close(reason, err) && count != nil {
		count.Inc()
	}
}
