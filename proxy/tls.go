package proxy

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/kproxy/kproxy/tlsconf"
)

// serverTLS is the TLS a Server speaks (the tls section, loaded and kept
// current by a tlsconf.Store). With either side on, every pair of the
// listener is relayed by the stream driver (stream.go) over Go's net and
// crypto/tls, which netpoll cannot carry; with neither, pairs stay on
// netpoll.
type serverTLS struct {
	store    *tlsconf.Store
	m        *tlsconf.Metrics // nil counts nothing
	listener *tls.Config      // nil: plaintext clients
}

// SetTLS puts the TLS of store in force for the listener, counting
// handshakes in m (nil: not counted). Call it before Listen. A store with
// neither side set changes nothing.
func (s *Server) SetTLS(store *tlsconf.Store, m *tlsconf.Metrics) {
	if !store.Config().Enabled() {
		s.tls = nil
		return
	}
	s.tls = &serverTLS{store: store, m: m, listener: store.ServerConfig()}
}

// on reports whether either side speaks TLS.
func (t *serverTLS) on() bool { return t != nil }

// clientTLS reports whether clients speak TLS to kproxy.
func (t *serverTLS) clientTLS() bool { return t != nil && t.listener != nil }

// upstreamTLS reports whether kproxy speaks TLS to the upstream.
func (t *serverTLS) upstreamTLS() bool { return t != nil && t.store.Config().Upstream != nil }

// accept runs a client's handshake, bounded by the listener's handshake
// timeout, and returns the connection to relay with the client's proven
// identities. The error names the cause.
func (t *serverTLS) accept(raw net.Conn) (net.Conn, []string, error) {
	if !t.clientTLS() {
		return raw, nil, nil
	}
	tc := tls.Server(&heldConn{Conn: raw}, t.listener)
	if err := t.m.HandshakeConn(tc, tlsconf.SideClient, t.store.Config().Listener.Timeout()); err != nil {
		return nil, nil, err
	}
	return tc, tlsconf.Identities(tc.ConnectionState()), nil
}

// dial wraps c, connected to the upstream at addr, in TLS when the
// upstream speaks it, and runs the handshake (bounded by the upstream's
// handshake timeout, and by deadline when it is sooner). count says
// whether the handshake is counted (not for readiness checks).
func (t *serverTLS) dial(c net.Conn, addr string, deadline time.Time, count bool) (net.Conn, error) {
	if !t.upstreamTLS() {
		return c, nil
	}
	tc := tls.Client(&heldConn{Conn: c}, t.store.ClientConfig(addr))
	timeout := t.store.Config().Upstream.Timeout()
	if !deadline.IsZero() {
		timeout = min(timeout, time.Until(deadline))
	}
	m := t.m
	if !count {
		m = nil
	}
	if err := m.HandshakeConn(tc, tlsconf.SideUpstream, timeout); err != nil {
		return nil, err
	}
	return tc, nil
}
