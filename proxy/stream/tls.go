package stream

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/kproxy/kproxy/relay"
	"github.com/kproxy/kproxy/tlsconf"
)

// TLS is the TLS a server speaks (the tls section, loaded and kept
// current by a tlsconf.Store). With either side on, every connection of
// the listeners is relayed by this driver over Go's net and crypto/tls,
// which netpoll cannot carry; with neither, connections stay on netpoll.
// A nil *TLS speaks none.
type TLS struct {
	store    *tlsconf.Store
	m        *tlsconf.Metrics // nil counts nothing
	listener *tls.Config      // nil: plaintext clients
	// hs bounds the client handshakes in progress (set by the driver,
	// which knows the budget).
	hs *handshakes
}

// NewTLS returns the TLS of store, counting handshakes in m (nil: not
// counted), or nil when store has neither side set.
func NewTLS(store *tlsconf.Store, m *tlsconf.Metrics) *TLS {
	if !store.Config().Enabled() {
		return nil
	}
	t := &TLS{store: store, m: m}
	if base := store.ServerConfig(); base != nil {
		t.listener = withCPUSlots(base)
	}
	return t
}

// On reports whether either side speaks TLS.
func (t *TLS) On() bool { return t != nil }

// ClientTLS reports whether clients speak TLS to kproxy.
func (t *TLS) ClientTLS() bool { return t != nil && t.listener != nil }

// UpstreamTLS reports whether kproxy speaks TLS to the upstream.
func (t *TLS) UpstreamTLS() bool { return t != nil && t.store.Config().Upstream != nil }

// accept runs a client's handshake, bounded by the listener's handshake
// timeout, and returns the connection to relay with the client's proven
// identity. The error names the cause.
func (t *TLS) accept(raw net.Conn) (net.Conn, relay.Identity, error) {
	if !t.ClientTLS() {
		return raw, relay.Identity{}, nil
	}
	h, err := t.hs.enter(raw)
	if err != nil {
		return nil, relay.Identity{}, err
	}
	defer t.hs.leave(h)
	held := &heldConn{Conn: raw, hs: h}
	tc := tls.Server(held, t.listener)
	err = t.m.HandshakeConn(tc, tlsconf.SideClient, t.store.Config().Listener.Timeout())
	held.hs = nil
	if err != nil {
		return nil, relay.Identity{}, err
	}
	uris, cn := tlsconf.ClientIdentity(tc.ConnectionState())
	return tc, relay.Identity{URIs: uris, CN: cn}, nil
}

// Dial wraps c, connected to the upstream at addr, in TLS when the
// upstream speaks it, and runs the handshake (bounded by the upstream's
// handshake timeout, and by deadline when it is sooner). count says
// whether the handshake is counted (not for readiness checks).
func (t *TLS) Dial(c net.Conn, addr string, deadline time.Time, count bool) (net.Conn, error) {
	if !t.UpstreamTLS() {
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
