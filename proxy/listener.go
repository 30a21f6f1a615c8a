package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/proxy/core"
)

// bootstrapNode marks the listener of proxy.listen: it fronts
// proxy.upstream (the one broker, or the cluster's bootstrap) rather than
// a node.
const bootstrapNode int32 = -1

// driverListener is a port as a driver serves it.
type driverListener interface {
	Addr() net.Addr
	Serve() error
	// Stop closes the port (and, on netpoll, the event loop: it runs
	// last, after the drain).
	Stop(ctx context.Context)
	// Close unbinds a port never served.
	Close()
}

// listener is one port kproxy serves. Every connection it accepts pairs
// with a connection to its upstream: proxy.upstream for proxy.listen, the
// broker's address as last learnt for a node port (cluster mode). Rules
// that match a listener match proxy.listen on every port: a node port is
// the same front, and a rule written for it must not be bypassed through
// a node port.
type listener struct {
	s    *Server
	addr string // as configured
	node int32  // bootstrapNode, or the node id this port serves
	port core.Port
	dl   driverListener
}

// bind opens the port addr for node, on the stream driver when TLS is
// on, else on netpoll.
func (s *Server) bind(addr string, node int32) (*listener, error) {
	l := &listener{s: s, addr: addr, node: node}
	l.port = core.Port{Upstream: l.upstream, DialFailed: l.dialFailed, Unknown: l.unknownNode}
	var err error
	if s.streams != nil {
		l.dl, err = s.streams.Listen(addr, &l.port)
	} else {
		l.dl, err = s.poll.Listen(addr, &l.port)
	}
	if err != nil {
		return nil, l.bindError(err)
	}
	return l, nil
}

func (l *listener) bindError(err error) error {
	if l.node == bootstrapNode {
		return fmt.Errorf("listen on %s: %w", l.addr, err)
	}
	return fmt.Errorf("listen on %s for node %d (cluster.node_port_base): %w", l.addr, l.node, err)
}

// Addr is the bound address.
func (l *listener) Addr() net.Addr { return l.dl.Addr() }

// serve accepts until stop.
func (l *listener) serve() error { return l.dl.Serve() }

// stop closes the port.
func (l *listener) stop(ctx context.Context) { l.dl.Stop(ctx) }

// close unbinds a listener that never served.
func (l *listener) close() { l.dl.Close() }

// upstream is the address a new client of this port is paired with. A
// node port whose broker is not known yet waits (up to dial_timeout) for a
// discovery through the bootstrap.
func (l *listener) upstream(ctx context.Context) (string, error) {
	if l.node == bootstrapNode {
		return l.s.cfg.Upstream, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.s.cfg.DialTimeout)
	defer cancel()
	addr, err := l.s.topo.Wait(ctx, l.node, l.s.rediscover)
	if err == nil && !l.s.cluster.HostAllowed(addr) {
		// Not dialled: kproxy's certificate and credentials go only to
		// the hosts cluster.allowed_hosts names.
		return "", hostNotAllowedError{addr}
	}
	return addr, err
}

// hostNotAllowedError is a node whose broker's host is not in
// cluster.allowed_hosts.
type hostNotAllowedError struct{ addr string }

func (e hostNotAllowedError) Error() string {
	return "broker " + e.addr + " is not in cluster.allowed_hosts: kproxy does not dial it"
}

// dialFailed is told that this port's upstream could not be reached: a
// broker that moved is found by asking the bootstrap again.
func (l *listener) dialFailed() {
	if l.node != bootstrapNode {
		l.s.rediscover()
	}
}

// unknownNode refuses a client of a node port whose broker kproxy could
// not learn in time.
func (l *listener) unknownNode(log *zerolog.Logger, err error) {
	var host hostNotAllowedError
	if errors.As(err, &host) {
		l.s.core.Refuse(log, "host_not_allowed", err, "connection refused: its broker's host is not in cluster.allowed_hosts")
		return
	}
	l.s.core.Refuse(log, "unknown_node", err, "connection refused: its node is not a known broker; the client should refresh its metadata")
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
