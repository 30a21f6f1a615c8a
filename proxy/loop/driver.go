package loop

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/proxy/core"
)

// Driver relays plaintext connections on netpoll's event loop for one
// core: its listeners, its pairs' overflow sweep, and whether batches may
// be relayed on the poller.
type Driver struct {
	k *core.Core
	// inline lets runTask relay batches on the poller; a linger keeps a
	// goroutine per busy connection instead.
	inline bool

	// waiting lists the pairs the overflow sweep checks (see waitStart).
	waitMu    sync.Mutex
	waiting   []*pair
	waitKick  chan struct{} // one slot: the list is no longer empty
	watchOnce sync.Once
}

// New returns the netpoll driver of k.
func New(k *core.Core) *Driver {
	return &Driver{k: k, inline: k.Limits.Linger == 0, waitKick: make(chan struct{}, 1)}
}

// Start starts the overflow sweep, once; it ends with the core.
func (d *Driver) Start() { d.watchOnce.Do(func() { go d.watchOverflow() }) }

// setSockets sizes c's socket buffers.
func (d *Driver) setSockets(c netpoll.Connection) {
	if fc, ok := c.(interface{ Fd() int }); ok {
		d.k.Sockets.SetFd(fc.Fd())
	}
}

// Listener is one port on netpoll's event loop.
type Listener struct {
	d    *Driver
	port *core.Port
	ln   netpoll.Listener
	loop netpoll.EventLoop
	// mu orders Serve and Stop on netpoll, whose Shutdown does nothing
	// before its Serve has begun: a stop that comes first keeps Serve
	// from starting, and served (closed when loop.Serve returns) lets
	// one that comes meanwhile wait for it.
	mu      sync.Mutex
	stopped bool
	served  chan struct{}
}

// Listen binds addr; its clients are paired with port's upstream.
func (d *Driver) Listen(addr string, port *core.Port) (*Listener, error) {
	ln, err := netpoll.CreateListener("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &Listener{d: d, port: port, ln: ln}
	loop, err := netpoll.NewEventLoop(d.onRequest, netpoll.WithOnConnect(l.onConnect))
	if err != nil {
		ln.Close()
		return nil, err
	}
	l.loop = loop
	return l, nil
}

// Addr is the bound address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Serve accepts until Stop.
func (l *Listener) Serve() error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return nil
	}
	served := make(chan struct{})
	l.served = served
	l.mu.Unlock()
	defer close(served)
	return l.loop.Serve(l.ln)
}

// Stop closes the port; netpoll's Shutdown also closes the connections
// idle at that moment, so the server calls it last, after its drain.
func (l *Listener) Stop(ctx context.Context) {
	l.mu.Lock()
	l.stopped = true
	served := l.served
	l.mu.Unlock()
	if served == nil { // never served: only the port to close
		l.ln.Close()
		return
	}
	for {
		l.loop.Shutdown(ctx) // a no-op until Serve has handed netpoll its server
		select {
		case <-served:
			return
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Close unbinds a listener that never served.
func (l *Listener) Close() { l.ln.Close() }
