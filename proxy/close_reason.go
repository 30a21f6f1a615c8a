package proxy

import (
	"errors"
	"io"
	"net"
	"os"

	"github.com/cloudwego/netpoll"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/relay"
)

// closeCause is why a connection is closed for an error, as logged and
// counted.
type closeCause struct {
	reason string
	err    error              // logged with the reason; nil for an ordinary close
	count  prometheus.Counter // counted once the pair is closed by this call
	rule   string             // a policy rule that closed it
}

// classify says why an error met while relaying from side ("client" or
// "upstream") closes a connection, whichever driver relays it.
func (s *Server) classify(side string, err error, log *zerolog.Logger) closeCause {
	var size *framing.SizeError
	var mismatch *correlate.MismatchError
	var cw errClientWrite
	var uw errUpstreamWrite
	var pc relay.PolicyCloseError
	var unreadable relay.SaslUnreadableError
	var addr relay.AddressError
	var reauth relay.ReauthError
	m := s.m
	c := closeCause{reason: side + " error", err: err}
	switch {
	case errors.As(err, &size):
		c.count, c.reason = m.oversize.WithLabelValues(side), side+" frame refused: "+size.Error()
	case errors.As(err, &mismatch):
		c.count, c.reason = m.protocolErrs.WithLabelValues("correlation_mismatch"), "correlation id mismatch"
		log.Error().Int32("upstream_id", mismatch.Got).Int32("expected_upstream_id", mismatch.Want).
			Int32("client_id", mismatch.ClientID).Msg("response does not match the oldest request in flight")
	case errors.Is(err, correlate.ErrUnexpectedResponse):
		c.count, c.reason = m.protocolErrs.WithLabelValues("unexpected_response"), "upstream sent a response with nothing in flight"
	case errors.As(err, &addr):
		c.count, c.reason = m.protocolErrs.WithLabelValues("unmapped_broker"), "upstream named a broker kproxy cannot front"
		if !errors.Is(err, cluster.ErrUnmapped) {
			c.reason = "upstream sent a response that may name brokers and kproxy cannot read"
		}
	case errors.As(err, &reauth):
		c.reason = "upstream re-authentication failed"
	case errors.As(err, &unreadable):
		c.count, c.reason = m.protocolErrs.WithLabelValues("sasl_unreadable_request"), unreadable.Error()
	case errors.Is(err, framing.ErrMalformed):
		c.count, c.reason = m.protocolErrs.WithLabelValues("malformed_"+side), side+" sent a malformed frame"
	case errors.As(err, &pc):
		c.reason, c.rule = "policy: "+pc.Error(), pc.Verdict.Rule
	case errors.Is(err, relay.ErrOverflow):
		c.count, c.reason = m.overflow.WithLabelValues(side), side+" sent more than max_unread_bytes ahead"
	case errors.Is(err, errOverBudget), errors.Is(err, errStreamBudget):
		c.count, c.reason = m.overBudget.WithLabelValues(side), side+" input over max_buffered_bytes"
	case errors.Is(err, errSlowOverBudget):
		c.count, c.reason = m.overBudget.WithLabelValues(side), side+" reads too slowly: the batch kept for it is the largest over max_buffered_bytes"
	case errors.Is(err, errWriteStalled):
		c.count, c.reason = m.writeStalls.WithLabelValues(side), side+" write stalled"
	case errors.As(err, &cw) && errors.Is(err, os.ErrDeadlineExceeded):
		c.count, c.reason = m.writeStalls.WithLabelValues("client"), "client write stalled"
	case errors.As(err, &uw) && errors.Is(err, os.ErrDeadlineExceeded):
		c.count, c.reason = m.writeStalls.WithLabelValues("upstream"), "upstream write stalled"
	case errors.Is(err, netpoll.ErrReadTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		c.reason = side + " stalled inside a frame past read_timeout"
	case errors.As(err, &cw):
		c.reason, c.err = reasonClientClosed, cw.error
	case errors.As(err, &uw):
		c.reason, c.err = reasonUpstreamClosed, uw.error
	case errors.Is(err, relay.ErrClientGone):
		c.reason, c.err = reasonClientClosed, nil
	case errors.Is(err, correlate.ErrClosed), errors.Is(err, netpoll.ErrEOF), errors.Is(err, netpoll.ErrConnClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		c.reason, c.err = side+" closed", nil
	}
	return c
}

// closed counts and reports a close that this call made.
func (s *Server) closedFor(c closeCause) {
	if c.rule != "" {
		if eng := s.policies.Load(); eng != nil {
			eng.Closed(c.rule)
		}
	}
	if c.count != nil {
		c.count.Inc()
	}
}

// closeOnError closes the pair for an error met while relaying from side
// ("client" or "upstream"), counting and logging it by kind. Two sides (or
// the overflow sweep) may fail at once; only the call that closes the pair
// counts.
func (p *pair) closeOnError(side string, err error) {
	if p.closed.Load() {
		return
	}
	c := p.s.classify(side, err, &p.log)
	if p.close(c.reason, c.err) {
		p.s.closedFor(c)
	}
}
