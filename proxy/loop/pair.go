package loop

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
)

// pair is one client connection and the upstream connection kproxy opened
// for it, on netpoll: the transport half of a core.Conn. Each side's
// reader is consumed only by that side's OnRequest handler; the upstream
// writer is owned by the client handler (upMu), and the client writer by
// whoever holds the Conn's WMu.
type pair struct {
	d        *Driver
	c        *core.Conn
	sess     *relay.Session // c.Sess, set before relaying starts
	client   netpoll.Connection
	upstream netpoll.Connection
	// upLarge is set once a large batch went upstream and the socket got
	// proxy.large_frame_send_buffer_bytes (sockopt.go).
	upLarge atomic.Bool
	// upBatch and cliBatch are the frames of the batch being relayed in
	// the goroutine pool, upstream (owned by the client handler) and to
	// the client (under WMu); a batch on the poller uses its rawConn's.
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
	// the poller. CloseSockets takes both before closing the connections:
	// netpoll finishes a close that lands during a task inside the task,
	// and on the poller that spins forever (the poller still holds the
	// operator).
	clientTask, upstreamTask sync.Mutex
	inClient, inUpstream     bool
	upHanded, clientHanded   bool

	// failing is set when a batch on the poller failed: the pair is being
	// closed from a goroutine, and nothing more is relayed meanwhile.
	failing atomic.Bool
	// upReady is set once the upstream's handler is installed. netpoll
	// runs a task at once from SetOnRequest if input is already there,
	// on the caller's goroutine, not a poller, so only tasks after that
	// may run inline.
	upReady atomic.Bool
	// blocked counts the pair's relays waiting on a flush, a full table or
	// a throttle; only such pairs can fall behind netpoll's reads, so only
	// they are swept for overflow.
	blocked atomic.Int32
	// swept is set while the pair is on the overflow sweep's list;
	// idleSweeps counts the sweeps in a row that found it not waiting
	// (under Driver.waitMu).
	swept      atomic.Bool
	idleSweeps int

	// flushes[to] is odd while a flush to that side (toClient,
	// toUpstream) is under way: it is bumped as one starts and as it
	// ends. stalls[to] is what the sweep saw of it (under Driver.waitMu).
	flushes [2]atomic.Uint64
	stalls  [2]stallWatch

	// holding is what the pair has charged to the core's budget.
	holding holding

	// inlineRead[from] is the input of that side relayed on the poller
	// since runTask last sent one of its batches to the pool to let
	// netpoll end a buffer node (see inlineResetBytes); under that side's
	// task lock.
	inlineRead [2]int
}

// onConnect opens a newly accepted client through the core's opening
// sequence, with its own upstream connection. netpoll runs it on its
// goroutine pool before the first onRequest, so a slow upstream dial holds
// up only this client.
func (l *Listener) onConnect(ctx context.Context, client netpoll.Connection) context.Context {
	d := l.d
	var p *pair
	c := d.k.Open(core.Opening{
		Client: client,
		Port:   l.port,
		Reset:  func() { refuse(client) },
		Drop:   func() { refuse(client) },
		First: func() ([]byte, error) {
			client.SetReadTimeout(d.k.Limits.ReadTimeout)
			return client.Reader().Peek(relay.FirstHead)
		},
		Gone: func() bool { return !client.IsActive() },
		Dial: func(_ context.Context, addr string) (net.Conn, error) {
			up, err := dialUpstream(addr, d.k.Limits.DialTimeout)
			if err != nil {
				return nil, err
			}
			d.setSockets(client)
			d.setSockets(up)
			return up, nil
		},
		Link: func(c *core.Conn, up net.Conn) (relay.Link, core.Transport) {
			p = &pair{d: d, c: c, client: client, upstream: up.(netpoll.Connection)}
			return p, p
		},
		Setup: func(*core.Conn) { p.start() },
	})
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, pairKey{}, p)
}

// start makes a registered pair relay: its timeouts, its close callbacks
// and write guards, and the upstream's handler.
func (p *pair) start() {
	p.sess = p.c.Sess
	client, up := p.client, p.upstream
	for _, conn := range []netpoll.Connection{client, up} {
		conn.SetReadTimeout(p.d.k.Limits.ReadTimeout)
		// netpoll's write timeout bounds a whole flush, and cuts off a
		// consumer still reading a large response; write_timeout is a
		// stall timeout instead, kept by the overflow sweep (stall.go).
		conn.SetWriteTimeout(0)
	}
	client.AddCloseCallback(func(netpoll.Connection) error { p.c.Close(core.ReasonClientClosed, nil); return nil })
	up.AddCloseCallback(func(netpoll.Connection) error { p.c.Close(core.ReasonUpstreamClosed, nil); return nil })
	p.upOut, p.cliOut = guardWrites(up), guardWrites(client)
	p.up, p.cli = newRawConn(up, p.upOut), newRawConn(client, p.cliOut)
	if !setUpstreamContext(up, context.WithValue(context.Background(), upstreamKey{}, p)) {
		upstreamContextOnce.Do(func() {
			p.d.k.Log.Warn().Msg("cannot mark upstream connections for netpoll's runner; responses are relayed from the goroutine pool")
		})
	}
	up.SetOnRequest(p.onUpstream)
	p.upReady.Store(true)
}

type pairKey struct{}

var upstreamContextOnce sync.Once

// onRequest runs the client side of the pair that onConnect made.
func (d *Driver) onRequest(ctx context.Context, c netpoll.Connection) error {
	p, ok := ctx.Value(pairKey{}).(*pair)
	if !ok { // onConnect refused it
		c.Close()
		return nil
	}
	return p.onClient(ctx, c)
}

// CloseSockets closes both sides (core.Transport), once the tasks on the
// poller are out of the way.
func (p *pair) CloseSockets() {
	p.clientTask.Lock()
	p.upstreamTask.Lock()
	p.client.Close()
	p.upstream.Close()
	p.upstreamTask.Unlock()
	p.clientTask.Unlock()
}

// fail closes the pair for an error met relaying from side, netpoll's
// own errors marked for the core's classification.
func (p *pair) fail(side string, err error) {
	switch {
	case errors.Is(err, netpoll.ErrReadTimeout):
		err = core.Mark(core.ErrReadTimeout, err)
	case errors.Is(err, netpoll.ErrEOF), errors.Is(err, netpoll.ErrConnClosed):
		err = core.Mark(core.ErrPeerClosed, err)
	}
	p.c.CloseOnError(side, err)
}

// recoverPanic closes the pair whose handler panicked; other pairs go on.
// On the poller the input left is dropped (netpoll would call the handler
// again for it) and the close runs in another goroutine.
func (p *pair) recoverPanic(side string, c netpoll.Connection) {
	if r := recover(); r != nil {
		p.c.LogPanic(side, r)
		switch {
		case side == "client" && p.inClient:
			p.abandonPanic(c, p.up)
		case side == "upstream" && p.inUpstream:
			p.sess.EndSpans(false)
			p.abandonPanic(c, p.cli)
		default:
			p.c.Close(core.ReasonPanic, core.ErrPanicked)
		}
	}
}

// abandonPanic ends a batch on the poller whose handler panicked: out's
// slices point into the input about to be released.
func (p *pair) abandonPanic(c netpoll.Connection, out *rawConn) {
	p.failing.Store(true)
	out.iov.Reset()
	dropInput(c.Reader())
	go p.c.Close(core.ReasonPanic, core.ErrPanicked)
}

// ReauthIdle re-authenticates the upstream connection now if it is due
// and no relay holds the request side (core.Reauther): a relay that does
// re-authenticates at its next request.
func (p *pair) ReauthIdle() error {
	if !p.upMu.TryLock() {
		return nil
	}
	defer p.upMu.Unlock()
	if p.c.Stopping() || p.failing.Load() {
		return nil
	}
	return p.sess.Reauthenticate(&p.upBatch)
}
