package proxy

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/relay"
	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/tracing"
)

// pair is one client connection and the upstream connection kproxy opened
// for it. Each side's reader is consumed only by that side's OnRequest
// handler; the upstream writer is owned by the client handler, and the
// client writer by whoever holds wmu.
type pair struct {
	s        *Server
	log      zerolog.Logger
	client   netpoll.Connection
	upstream netpoll.Connection
	// upLarge is set once a large batch went upstream and the socket got
	// proxy.large_frame_send_buffer_bytes (sockopt.go).
	upLarge atomic.Bool
	// sess is the Kafka half of the pair: the relay rules, the InFlight
	// table, the policy state, the spans and counters.
	sess   *relay.Session
	wmu    sync.Mutex // serializes writes to the client
	opened time.Time
	// upBatch and cliBatch are the frames of the batch being relayed in
	// the goroutine pool, upstream (owned by the client handler) and to
	// the client (under wmu); a batch on the poller uses its rawConn's.
	upBatch, cliBatch relay.Batch
	// upMu is held by whoever writes upstream: the client handler, or a
	// goroutine finishing a raw send it handed over.
	upMu sync.Mutex
	// up and cli write to the sockets directly for batches relayed on the
	// poller (nil if a connection has no fd). inClient and inUpstream are
	// set by runTask while it runs that side's handler on the poller;
	// upHanded and clientHanded tell it a goroutine now owns the writer.
	up, cli *rawConn
	// upOut and cliOut guard every write to a side's netpoll writer made
	// outside that side's own handler against its close (writeGuard).
	upOut, cliOut *writeGuard
	// clientTask and upstreamTask are held while that side's task runs on
	// the poller. close takes both before closing the connections: netpoll
	// finishes a close that lands during a task inside the task, and on
	// the poller that spins forever (the poller still holds the operator).
	clientTask, upstreamTask sync.Mutex
	inClient, inUpstream     bool
	upHanded, clientHanded   bool

	draining atomic.Bool
	closed   atomic.Bool
	// failing is set when a batch on the poller failed: the pair is being
	// closed from a goroutine, and nothing more is relayed meanwhile.
	failing atomic.Bool
	// upReady is set once the upstream's handler is installed. netpoll
	// runs a task at once from SetOnRequest if input is already there,
	// on the caller's goroutine, not a poller, so only tasks after that
	// may run inline.
	upReady atomic.Bool
	done    chan struct{}
	// blocked counts the pair's relays waiting on a flush, a full table or
	// a throttle; only such pairs can fall behind netpoll's reads, so only
	// they are swept for overflow.
	blocked atomic.Int32
	// swept is set while the pair is on the overflow sweep's list;
	// idleSweeps counts the sweeps in a row that found it not waiting
	// (under Server.waitMu).
	swept      atomic.Bool
	idleSweeps int

	// flushes[to] is odd while a flush to that side (toClient,
	// toUpstream) is under way: it is bumped as one starts and as it
	// ends. stalls[to] is what the sweep saw of it (under Server.waitMu).
	flushes [2]atomic.Uint64
	stalls  [2]stallWatch

	// holding is what the pair has charged to Server.budget.
	holding holding

	// inlineRead[from] is the input of that side relayed on the poller
	// since runTask last sent one of its batches to the pool to let
	// netpoll end a buffer node (see inlineResetBytes); under that side's
	// task lock.
	inlineRead [2]int
}

// Close reasons, as logged.
const (
	reasonClientClosed   = "client closed"
	reasonUpstreamClosed = "upstream closed"
	reasonDrained        = "drained"
	reasonDrainTimeout   = "drain timeout"
)

// onConnect pairs a newly accepted client with its own upstream
// connection. netpoll runs it on its goroutine pool before the first
// onRequest, so a slow upstream dial holds up only this client.
func (l *listener) onConnect(ctx context.Context, client netpoll.Connection) context.Context {
	s := l.s
	log := s.log.With().Str("client", client.RemoteAddr().String()).Logger()
	if why := s.reserve(); why != "" {
		refuse(client)
		s.turnAway(&log, why)
		return ctx
	}
	addr, err := l.upstream(ctx)
	if err != nil {
		s.unreserve()
		refuse(client)
		s.unknownNode(&log, l, err)
		return ctx
	}
	up, err := netpoll.DialConnection("tcp", addr, s.cfg.DialTimeout)
	if err != nil {
		s.unreserve()
		refuse(client)
		s.m.dialFailures.Inc()
		l.dialFailed()
		log.Error().Err(err).Str("upstream", addr).Msg("upstream dial failed; client connection reset")
		return ctx
	}
	s.sockets.setConn(client)
	s.sockets.setConn(up)
	var auth sasl.Result
	if s.sasl != nil {
		if auth, err = s.authenticate(up, addr, &log); err != nil {
			up.Close()
			s.unreserve()
			refuse(client)
			return ctx
		}
	}
	p := &pair{s: s, client: client, upstream: up, opened: time.Now(), done: make(chan struct{})}
	plog := log.With().Str("upstream", up.LocalAddr().String()+">"+addr)
	if s.sasl != nil {
		plog = plog.Str("upstream_principal", auth.Principal)
	}
	p.log = plog.Logger()
	var peer *tracing.Peer
	if s.tracer.On() {
		peer = tracing.NewPeer(client.RemoteAddr().String(), addr, s.topics)
	}
	p.sess = relay.New(l.env, p, p.log, peer)
	if s.sasl != nil {
		s.armSasl(p.sess, peer, addr, auth)
	}
	if why := register(s, s.pairs, p); why != "" {
		s.unreserve()
		refuse(client)
		up.Close()
		s.turnAway(&log, why)
		return ctx
	}
	for _, conn := range []netpoll.Connection{client, up} {
		conn.SetReadTimeout(s.framing.ReadTimeout)
		// netpoll's write timeout bounds a whole flush, and cuts off a
		// consumer still reading a large response; write_timeout is a
		// stall timeout instead, kept by the overflow sweep (stall.go).
		conn.SetWriteTimeout(0)
	}
	client.AddCloseCallback(func(netpoll.Connection) error { p.close(reasonClientClosed, nil); return nil })
	up.AddCloseCallback(func(netpoll.Connection) error { p.close(reasonUpstreamClosed, nil); return nil })
	p.upOut, p.cliOut = guardWrites(up), guardWrites(client)
	p.up, p.cli = newRawConn(up, p.upOut), newRawConn(client, p.cliOut)
	if !setUpstreamContext(up, context.WithValue(context.Background(), upstreamKey{}, p)) {
		upstreamContextOnce.Do(func() {
			s.log.Warn().Msg("cannot mark upstream connections for netpoll's runner; responses are relayed from the goroutine pool")
		})
	}
	up.SetOnRequest(p.onUpstream)
	p.upReady.Store(true)
	p.log.Info().Msg("connection opened")
	return context.WithValue(ctx, pairKey{}, p)
}

type pairKey struct{}

var upstreamContextOnce sync.Once

// onRequest runs the client side of the pair that onConnect made.
func (s *Server) onRequest(ctx context.Context, c netpoll.Connection) error {
	p, ok := ctx.Value(pairKey{}).(*pair)
	if !ok { // onConnect refused it
		c.Close()
		return nil
	}
	return p.onClient(ctx, c)
}

// drain asks the pair to finish what is in flight, take nothing new, and
// close. The table decides under its lock what was sent (its responses are
// awaited) and refuses everything after (never sent), so no request
// reaches the broker to have its response dropped by the close.
func (p *pair) drain() {
	p.draining.Store(true)
	if p.sess.Drain() {
		go p.closeIfDrained() // may wait for a response batch being written
	}
}

// closeIfDrained closes a draining pair once every response owed has been
// written to the client. An entry leaves the table before its response is
// flushed, so "drained" is read under wmu, which the writer holds until
// its batch is out. The caller must not hold wmu.
func (p *pair) closeIfDrained() {
	if !p.draining.Load() {
		return
	}
	p.wmu.Lock()
	drained := p.sess.Drained()
	p.wmu.Unlock()
	if drained {
		p.close(reasonDrained, nil)
	}
}

// close shuts both sides once, fails what is still in flight and logs one
// line for the connection. It reports whether this call closed the pair.
func (p *pair) close(reason string, err error) bool {
	if !p.closed.CompareAndSwap(false, true) {
		return false
	}
	p.clientTask.Lock()
	p.upstreamTask.Lock()
	p.client.Close()
	p.upstream.Close()
	p.upstreamTask.Unlock()
	p.clientTask.Unlock()
	p.releaseHeld()
	failed := p.sess.Close()
	p.s.m.open.Dec()
	unregister(p.s, p.s.pairs, p)
	close(p.done)
	logClosed(p.log, reason, err, p.opened, p.sess.Stats(), failed)
	return true
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

// recoverPanic closes the pair whose handler panicked; other pairs go on.
// On the poller the input left is dropped (netpoll would call the handler
// again for it) and the close runs in another goroutine.
func (p *pair) recoverPanic(side string, c netpoll.Connection) {
	if r := recover(); r != nil {
		p.log.Error().Str("side", side).Interface("panic", r).Bytes("stack", debug.Stack()).Msg("relay panicked")
		switch {
		case side == "client" && p.inClient:
			p.abandonPanic(c, p.up)
		case side == "upstream" && p.inUpstream:
			p.sess.EndSpans(false)
			p.abandonPanic(c, p.cli)
		default:
			p.close("panic", errors.New("relay panicked"))
		}
	}
}

// abandonPanic ends a batch on the poller whose handler panicked: out's
// slices point into the input about to be released.
func (p *pair) abandonPanic(c netpoll.Connection, out *rawConn) {
	p.failing.Store(true)
	out.iov.Reset()
	dropInput(c.Reader())
	go p.close("panic", errors.New("relay panicked"))
}
