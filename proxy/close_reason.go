package proxy

import (
	"errors"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// closeOnError closes the pair for an error met while relaying from side
// ("client" or "upstream"), counting and logging it by kind.
func (p *pair) closeOnError(side string, err error) {
	if p.closed.Load() {
		return
	}
	var size *framing.SizeError
	var mismatch *correlate.MismatchError
	var cw errClientWrite
	var uw errUpstreamWrite
	var pc errPolicyClose
	m := p.s.m
	switch {
	case errors.As(err, &size):
		m.oversize.WithLabelValues(side).Inc()
		p.close(side+" frame refused: "+size.Error(), err)
	case errors.As(err, &mismatch):
		m.protocolErrs.WithLabelValues("correlation_mismatch").Inc()
		p.log.Error().Int32("upstream_id", mismatch.Got).Int32("expected_upstream_id", mismatch.Want).
			Int32("client_id", mismatch.ClientID).Msg("response does not match the oldest request in flight")
		p.close("correlation id mismatch", err)
	case errors.Is(err, correlate.ErrUnexpectedResponse):
		m.protocolErrs.WithLabelValues("unexpected_response").Inc()
		p.close("upstream sent a response with nothing in flight", err)
	case errors.Is(err, framing.ErrMalformed):
		m.protocolErrs.WithLabelValues("malformed_" + side).Inc()
		p.close(side+" sent a malformed frame", err)
	case errors.As(err, &pc):
		if eng := p.s.policies.Load(); eng != nil {
			eng.Closed(pc.v.Rule)
		}
		p.close("policy: "+pc.Error(), err)
	case errors.Is(err, errOverflow):
		m.overflow.WithLabelValues(side).Inc()
		p.close(side+" sent more than max_unread_bytes ahead", err)
	case errors.Is(err, netpoll.ErrReadTimeout):
		p.close(side+" stalled inside a frame past read_timeout", err)
	case errors.As(err, &cw):
		p.close(reasonClientClosed, cw.error)
	case errors.As(err, &uw):
		p.close(reasonUpstreamClosed, uw.error)
	case errors.Is(err, correlate.ErrClosed), errors.Is(err, netpoll.ErrEOF), errors.Is(err, netpoll.ErrConnClosed):
		p.close(side+" closed", nil)
	default:
		p.close(side+" error", err)
	}
}
