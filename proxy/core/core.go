package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/relay"
)

// Limits are the bounds of the proxy section and the framing section that
// the core and the drivers apply to every connection.
type Limits struct {
	MaxConnections   int
	MaxUnreadBytes   int
	MaxBufferedBytes int
	DialTimeout      time.Duration
	// ReadTimeout is framing.read_timeout: how long a frame that has
	// begun may take to arrive whole.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// Linger is proxy.linger (the netpoll driver's).
	Linger time.Duration
}

// Core is the connections of one kproxy: their registry, their budget,
// and what their sessions share.
type Core struct {
	Limits Limits
	Log    zerolog.Logger
	M      *Metrics
	// Env is what every session shares.
	Env *relay.Env
	// Budget counts the bytes all connections hold against
	// max_buffered_bytes.
	Budget Budget
	// Sockets sizes the socket buffers of every connection.
	Sockets Sockets

	mu    sync.Mutex
	conns map[*Conn]struct{}
	// draining is set by Drain: registrations are refused from then on.
	draining atomic.Bool
	// slots counts the clients open or being opened (their upstream
	// dial under way) against max_connections.
	slots atomic.Int64
	idle  chan struct{} // closed when draining and the last connection closes

	stop     chan struct{} // closed by Shutdown
	stopOnce sync.Once
	// refusals rate-limits the log lines of refused connections.
	refusals refusalLog
}

// New returns the core for limits, with an empty registry.
func New(limits Limits, env *relay.Env, log zerolog.Logger, m *Metrics) *Core {
	k := &Core{Limits: limits, Log: log, M: m, Env: env, conns: make(map[*Conn]struct{}),
		idle: make(chan struct{}), stop: make(chan struct{})}
	k.Budget.max = int64(limits.MaxBufferedBytes)
	m.watchBudget(&k.Budget)
	return k
}

// Done is closed once the proxy stops (Shutdown): the drivers' and the
// server's background loops end then.
func (k *Core) Done() <-chan struct{} { return k.stop }

// Shutdown ends the background loops; it may be called more than once.
func (k *Core) Shutdown() { k.stopOnce.Do(func() { close(k.stop) }) }

// Draining reports whether Drain has started.
func (k *Core) Draining() bool { return k.draining.Load() }

// Slots is how many clients are open or being opened.
func (k *Core) Slots() int64 { return k.slots.Load() }

// Reserve takes a max_connections slot for a new client before its
// upstream is dialled, so a client refused for want of one costs no
// upstream connection (every upstream connection comes from kproxy's
// address, and a broker's per-IP quotas would then hit every client). It
// says why not, or "". The slot is given back by Unreserve, or by the
// close once the connection is registered.
func (k *Core) Reserve() string {
	if k.draining.Load() {
		return "draining"
	}
	for {
		n := k.slots.Load()
		if n >= int64(k.Limits.MaxConnections) {
			return "max_connections"
		}
		if k.slots.CompareAndSwap(n, n+1) {
			return ""
		}
	}
}

// Unreserve gives back a slot taken by Reserve for a client never
// registered.
func (k *Core) Unreserve() { k.slots.Add(-1) }

// register adds c, whose slot Reserve took, unless the core is draining,
// and says why not.
func (k *Core) register(c *Conn) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.draining.Load() {
		return "draining"
	}
	c.life.relay()
	k.conns[c] = struct{}{}
	k.M.Open.Inc()
	k.M.Accepted.Inc()
	return ""
}

// unregister removes c, gives back its slot, and ends a drain that waited
// for it.
func (k *Core) unregister(c *Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.conns[c]; !ok {
		return
	}
	delete(k.conns, c)
	k.Unreserve()
	if k.draining.Load() && len(k.conns) == 0 {
		close(k.idle)
	}
}

// Conns returns the connections open now.
func (k *Core) Conns() []*Conn {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*Conn, 0, len(k.conns))
	for c := range k.conns {
		out = append(out, c)
	}
	return out
}

// Len is how many connections are open.
func (k *Core) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.conns)
}

// Refuse counts a client refused for why and logs msg with err, the lines
// of a flood rate-limited (refusalLog).
func (k *Core) Refuse(log *zerolog.Logger, why string, err error, msg string) {
	k.M.Refused.WithLabelValues(why).Inc()
	k.refusals.line(log, why, err, msg)
}

// TurnAway counts and logs a client refused for why; the log lines of a
// flood are rate-limited (refusalLog), the count stays exact.
func (k *Core) TurnAway(log *zerolog.Logger, why string) { k.refusals.log(log, why, nil, k.M) }

// ErrAlreadyDraining: Drain was called before.
var ErrAlreadyDraining = errors.New("already draining")

// Drain turns new clients away, lets every connection finish its
// in-flight requests and close, and closes whatever is left when ctx
// ends.
func (k *Core) Drain(ctx context.Context) error {
	k.mu.Lock()
	if !k.draining.CompareAndSwap(false, true) {
		k.mu.Unlock()
		return ErrAlreadyDraining
	}
	live := make([]*Conn, 0, len(k.conns))
	for c := range k.conns {
		live = append(live, c)
	}
	if len(live) == 0 {
		close(k.idle)
	}
	k.mu.Unlock()
	k.Log.Info().Int("connections", len(live)).Msg("draining")
	for _, c := range live {
		c.Drain()
	}
	select {
	case <-k.idle:
		k.Log.Info().Msg("drained")
		return nil
	case <-ctx.Done():
	}
	live = k.Conns()
	for _, c := range live {
		c.Close(ReasonDrainTimeout, nil)
	}
	k.Log.Warn().Int("connections", len(live)).Msg("drain timeout: closed connections with requests in flight")
	return ctx.Err()
}
