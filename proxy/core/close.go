package core

import (
	"errors"
	"io"
	"net"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/relay"
)

// cause is why a connection is closed for an error, as logged and
// counted.
type cause struct {
	reason string
	err    error              // logged with the reason; nil for an ordinary close
	count  prometheus.Counter // counted once the connection is closed by this call
	rule   string             // a policy rule that closed it
}

// classify says why an error met while relaying from side closes a
// connection, whichever driver relays it: the session's errors as relay
// classifies them, then the transport's.
func (k *Core) classify(side string, err error, log *zerolog.Logger) cause {
	m := k.M
	c := cause{reason: side + " error", err: err}
	if f, ok := relay.Classify(side, err, log); ok {
		c.reason, c.rule = f.Reason, f.Rule
		switch f.Count {
		case relay.CountProtocol:
			c.count = m.ProtocolErrs.WithLabelValues(f.Kind)
		case relay.CountOversize:
			c.count = m.Oversize.WithLabelValues(side)
		case relay.CountOverflow:
			c.count = m.Overflow.WithLabelValues(side)
		}
		return c
	}
	var cw ClientWriteError
	var uw UpstreamWriteError
	switch {
	case errors.Is(err, ErrOverBudget):
		c.count, c.reason = m.OverBudget.WithLabelValues(side), side+" input over max_buffered_bytes"
	case errors.Is(err, ErrSlowOverBudget):
		c.count, c.reason = m.OverBudget.WithLabelValues(side), side+" reads too slowly: the batch kept for it is the largest over max_buffered_bytes"
	case errors.Is(err, ErrWriteStalled):
		c.count, c.reason = m.WriteStalls.WithLabelValues(side), side+" write stalled"
	case errors.As(err, &cw) && errors.Is(err, os.ErrDeadlineExceeded):
		c.count, c.reason = m.WriteStalls.WithLabelValues("client"), "client write stalled"
	case errors.As(err, &uw) && errors.Is(err, os.ErrDeadlineExceeded):
		c.count, c.reason = m.WriteStalls.WithLabelValues("upstream"), "upstream write stalled"
	case errors.Is(err, ErrReadTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		c.reason = side + " stalled inside a frame past read_timeout"
	case errors.As(err, &cw):
		c.reason, c.err = ReasonClientClosed, cw.Err
	case errors.As(err, &uw):
		c.reason, c.err = ReasonUpstreamClosed, uw.Err
	case errors.Is(err, relay.ErrClientGone):
		c.reason, c.err = ReasonClientClosed, nil
	case relay.Gone(err), errors.Is(err, ErrPeerClosed), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		c.reason, c.err = side+" closed", nil
	}
	return c
}

// closedFor counts a close that this call made.
func (k *Core) closedFor(c cause) {
	if c.rule != "" {
		k.Env.RuleClosed(c.rule)
	}
	if c.count != nil {
		c.count.Inc()
	}
}
