package core

import (
	"errors"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/relay"
)

// Close reasons, as logged.
const (
	ReasonClientClosed   = "client closed"
	ReasonUpstreamClosed = "upstream closed"
	ReasonDrained        = "drained"
	ReasonDrainTimeout   = "drain timeout"
	ReasonPanic          = "panic"
)

// Transport is what the core asks of a driver's connection: the sockets
// and what the connection has charged to the budget.
type Transport interface {
	// CloseSockets closes both sides. Close calls it once, first.
	CloseSockets()
	// Charged is what the input of side from (FromClient, FromUpstream)
	// has charged to the budget.
	Charged(from int) int64
	// Release gives back every charge. Once the connection is closed no
	// new charge may be made, so what this gives back stays given back.
	Release()
	// Blame says which side to close the connection for, and why, when
	// a charge of side from is over the budget: the side itself, or the
	// peer that does not take a batch kproxy holds for it.
	Blame(from int) (side string, err error)
}

// Sides whose input a connection holds: input read from side i is
// written to side 1-i.
const (
	FromClient, FromUpstream = 0, 1
)

// SideName is each side as logged and counted.
var SideName = [2]string{FromClient: "client", FromUpstream: "upstream"}

// Conn is one client connection and the upstream connection kproxy opened
// for it, as both drivers share it: its session, its lifecycle, its
// closing line. A driver's own connection holds it and is its Transport.
type Conn struct {
	core *Core
	// Log names the client, the upstream and the principals.
	Log zerolog.Logger
	// Sess is the Kafka half: the relay rules, the InFlight table, the
	// policy state, the spans and counters.
	Sess *relay.Session
	// WMu serializes writes to the client: responses, kproxy's own
	// answers. Whoever writes a batch holds it until the batch is out.
	WMu sync.Mutex
	// Opened is when the connection was made, for its closing line and
	// for choosing the oldest of equal budget holders.
	Opened time.Time
	life   lifecycle
	done   chan struct{}
	t      Transport
	// reauth re-authenticates an idle connection (see armReauth); nil
	// without SASL re-authentication.
	reauth atomic.Pointer[time.Timer]
}

// Reauther is a Transport that can re-authenticate its upstream
// connection on the session's timer, independent of client traffic:
// ReauthIdle runs Session.Reauthenticate on the request side if that is
// free, and does nothing if a relay holds it (that relay re-authenticates
// at its next request).
type Reauther interface {
	ReauthIdle() error
}

// reauthRetry is how soon the timer looks again at a re-authentication
// that is still due (a relay held the request side).
const reauthRetry = time.Second

// armReauth starts the connection's re-authentication timer, when the
// session has one and the driver can run it: a connection idle, or muted
// by a throttle, past its session's re-authentication point would send
// its next request after the broker's session ended, and be closed.
func (c *Conn) armReauth() {
	r, ok := c.t.(Reauther)
	at := c.Sess.ReauthAt()
	if !ok || at.IsZero() {
		return
	}
	// Made stopped and then set, so the callback always finds it.
	t := time.AfterFunc(time.Hour, func() {
		if c.Stopping() {
			return
		}
		if err := r.ReauthIdle(); err != nil {
			if c.Stopping() || errors.Is(err, correlate.ErrDraining) || errors.Is(err, correlate.ErrClosed) {
				// A drain or a close came meanwhile: it ends the
				// connection once every response owed is written,
				// and this re-authentication is not its cause.
				c.CloseIfDrained()
				return
			}
			c.CloseOnError("upstream", err)
			return
		}
		if next := c.Sess.ReauthAt(); !next.IsZero() && !c.Stopping() {
			t := c.reauth.Load()
			t.Reset(max(time.Until(next), reauthRetry))
			if c.Stopping() { // closed meanwhile: Close may have stopped it already
				t.Stop()
			}
		}
	})
	t.Stop()
	c.reauth.Store(t)
	if c.Closed() { // closed meanwhile: Close may have looked already
		return
	}
	t.Reset(time.Until(at))
}

// State is where the connection is in its lifecycle.
func (c *Conn) State() State { return c.life.load() }

// Closed reports whether the connection is closed.
func (c *Conn) Closed() bool { return c.life.load() == StateClosed }

// Stopping reports whether the connection takes nothing new: it is
// draining or closed.
func (c *Conn) Stopping() bool { return c.life.load() >= StateDraining }

// Done is closed once the connection is.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Transport is the driver's connection.
func (c *Conn) Transport() Transport { return c.t }

// Drain asks the connection to finish what is in flight, take nothing
// new, and close. The table decides under its lock what was sent (its
// responses are awaited) and refuses everything after (never sent), so
// no request reaches the broker to have its response dropped by the
// close.
func (c *Conn) Drain() {
	if !c.life.drain() {
		return
	}
	if c.Sess.Drain() {
		go c.CloseIfDrained() // may wait for a response batch being written
	}
}

// CloseIfDrained closes a draining connection once every response owed
// has been written to the client. An entry leaves the table before its
// response is flushed, so "drained" is read under WMu, which the writer
// holds until its batch is out. The caller must not hold WMu.
func (c *Conn) CloseIfDrained() {
	if c.life.load() != StateDraining {
		return
	}
	c.WMu.Lock()
	drained := c.Sess.Drained()
	c.WMu.Unlock()
	if drained {
		c.Close(ReasonDrained, nil)
	}
}

// Close shuts both sides once, gives back the budget charge, fails what
// is still in flight and logs one line for the connection. It reports
// whether this call closed it.
func (c *Conn) Close(reason string, err error) bool {
	if !c.life.close() {
		return false
	}
	if t := c.reauth.Load(); t != nil {
		t.Stop()
	}
	c.t.CloseSockets()
	c.t.Release()
	failed := c.Sess.Close()
	c.core.M.Open.Dec()
	c.core.unregister(c)
	close(c.done)
	logClosed(c.Log, reason, err, c.Opened, c.Sess.Stats(), failed)
	return true
}

// CloseOnError closes the connection for an error met while relaying
// from side ("client" or "upstream"), counting and logging it by kind.
// Two sides (or a driver's watch) may fail at once; only the call that
// closes the connection counts.
func (c *Conn) CloseOnError(side string, err error) {
	if c.Closed() {
		return
	}
	cause := c.core.classify(side, err, &c.Log)
	if c.Close(cause.reason, cause.err) {
		c.core.closedFor(cause)
	}
}

// LogPanic logs a relay that panicked on side, with its stack; the
// driver then closes the connection (ErrPanicked) its own way.
func (c *Conn) LogPanic(side string, r any) {
	c.Log.Error().Str("side", side).Interface("panic", r).Bytes("stack", debug.Stack()).Msg("relay panicked")
}

// logClosed writes a connection's one closing line.
func logClosed(log zerolog.Logger, reason string, err error, opened time.Time, st relay.Stats, failed int) {
	ev := log.Info()
	if err != nil {
		ev = log.Warn().Err(err)
	}
	ev.Str("reason", reason).
		Dur("duration_ms", time.Since(opened)).
		Int64("requests", st.Requests).
		Int64("responses", st.Responses).
		Int64("bytes_in", st.BytesIn).
		Int64("bytes_out", st.BytesOut).
		Int("failed_in_flight", failed).
		Msg("connection closed")
}
