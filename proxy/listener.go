package proxy

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/relay"
)

// bootstrapNode marks the listener of proxy.listen: it fronts
// proxy.upstream (the one broker, or the cluster's bootstrap) rather than
// a node.
const bootstrapNode int32 = -1

// listener is one port kproxy serves. Every connection it accepts pairs
// with a connection to its upstream: proxy.upstream for proxy.listen, the
// broker's address as last learnt for a node port (cluster mode).
type listener struct {
	s    *Server
	addr string // as configured
	node int32  // bootstrapNode, or the node id this port serves
	// env is what its sessions share. Rules that match a listener match
	// proxy.listen on every port: a node port is the same front, and a
	// rule written for it must not be bypassed through a node port.
	env *relay.Env
	// ln and loop accept on netpoll; sln on Go's net when TLS is on
	// (the stream driver).
	ln   netpoll.Listener
	loop netpoll.EventLoop
	sln  net.Listener
}

// bind opens the port addr for node.
func (s *Server) bind(addr string, node int32) (*listener, error) {
	l := &listener{s: s, addr: addr, node: node, env: s.env}
	if s.tls.on() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, l.bindError(err)
		}
		l.sln = ln
		return l, nil
	}
	ln, err := netpoll.CreateListener("tcp", addr)
	if err != nil {
		return nil, l.bindError(err)
	}
	loop, err := netpoll.NewEventLoop(s.onRequest, netpoll.WithOnConnect(l.onConnect))
	if err != nil {
		ln.Close()
		return nil, err
	}
	l.ln, l.loop = ln, loop
	return l, nil
}

func (l *listener) bindError(err error) error {
	if l.node == bootstrapNode {
		return fmt.Errorf("listen on %s: %w", l.addr, err)
	}
	return fmt.Errorf("listen on %s for node %d (cluster.node_port_base): %w", l.addr, l.node, err)
}

// Addr is the bound address.
func (l *listener) Addr() net.Addr {
	if l.sln != nil {
		return l.sln.Addr()
	}
	return l.ln.Addr()
}

// serve accepts until stop.
func (l *listener) serve() error {
	if l.sln != nil {
		return l.s.serveStreams(l)
	}
	return l.loop.Serve(l.ln)
}

// stop closes the port; netpoll's Shutdown also closes the connections
// idle at that moment, so the server calls it last, after its drain.
func (l *listener) stop(ctx context.Context) {
	if l.sln != nil {
		l.sln.Close()
		return
	}
	l.loop.Shutdown(ctx)
}

// close unbinds a listener that never served.
func (l *listener) close() {
	if l.sln != nil {
		l.sln.Close()
		return
	}
	l.ln.Close()
}

// upstream is the address a new client of this port is paired with. A
// node port whose broker is not known yet waits (up to dial_timeout) for a
// discovery through the bootstrap.
func (l *listener) upstream(ctx context.Context) (string, error) {
	if l.node == bootstrapNode {
		return l.s.cfg.Upstream, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.s.cfg.DialTimeout)
	defer cancel()
	return l.s.topo.Wait(ctx, l.node, l.s.rediscover)
}

// dialFailed is told that this port's upstream could not be reached: a
// broker that moved is found by asking the bootstrap again.
func (l *listener) dialFailed() {
	if l.node != bootstrapNode {
		l.s.rediscover()
	}
}

// shutdownAll stops every listener at once, each bounded by a second.
func shutdownAll(ls []*listener) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan struct{}, len(ls))
	for _, l := range ls {
		go func() { l.stop(ctx); done <- struct{}{} }()
	}
	for range ls {
		<-done
	}
}
