package proxy

import (
	"github.com/kproxy/kproxy/proxy/loop"
	"github.com/kproxy/kproxy/proxy/stream"
	"github.com/kproxy/kproxy/tlsconf"
)

// SetTLS puts the TLS of store in force for the listeners, counting
// handshakes in m (nil: not counted): with either side on, every
// connection is relayed by the stream driver over Go's net and
// crypto/tls, which netpoll cannot carry. Call it before Listen. A store
// with neither side set changes nothing.
func (s *Server) SetTLS(store *tlsconf.Store, m *tlsconf.Metrics) {
	s.tls = stream.NewTLS(store, m)
	s.streams = nil
	if s.tls.On() {
		maxHandshakes := 0
		if l := store.Config().Listener; l != nil {
			maxHandshakes = l.MaxHandshakes
		}
		s.streams = stream.New(s.core, s.tls, maxHandshakes)
	}
}

// ConfigureNetpoll sets netpoll's process-wide settings for kproxy's
// relay (loop.Configure); call it once at start, before any Server
// listens.
func ConfigureNetpoll() error { return loop.Configure() }
