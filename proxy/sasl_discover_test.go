package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// TestDiscoverAfterSaslKeepsDeadline: a bootstrap that authenticates
// kproxy and then never answers its Metadata holds a discovery only until
// the discovery's deadline. The SASL exchange cleared the connection's
// deadline when it ended, so the discovery then waited for ever and the
// cluster's topology was never learnt again.
func TestDiscoverAfterSaslKeepsDeadline(t *testing.T) {
	stub := startSaslStub(t, false, func(net.Conn, []byte) {}) // authenticated: silent
	env := startProxyWith(t, stub.addr(), nil, func(s *Server) { s.SetSasl(plainOriginator(t, "pw")) },
		func(c *Config, f *framing.Config, _ *correlate.Config) {
			c.DialTimeout = 300 * time.Millisecond
			f.ReadTimeout = 300 * time.Millisecond
		})
	done := make(chan error, 1)
	go func() { done <- env.srv.discover() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("discovery worked against a bootstrap that never answers it")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the discovery is still waiting for the bootstrap after 30s; its deadline is 600ms")
	}
}
