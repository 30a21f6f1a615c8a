package proxy

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/cluster"
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

// TestDiscoverAfterSaslClosedIsNotNeedsAuth: a bootstrap that closes
// kproxy's Metadata after kproxy authenticated to it has not refused an
// unauthenticated discovery. kproxy used to take it for one
// (cluster.ErrNeedsAuth: "kproxy does not authenticate"), call the
// discovery settled and report the topology ready, though the clients'
// Metadata, sent on connections kproxy authenticated the same way, get no
// further; it is now a failed discovery, retried, and not ready.
func TestDiscoverAfterSaslClosedIsNotNeedsAuth(t *testing.T) {
	stub := startSaslStub(t, false, func(c net.Conn, frame []byte) {
		if int16(binary.BigEndian.Uint16(frame[4:])) == framing.KeyApiVersions {
			r := kmsg.NewPtrApiVersionsResponse()
			r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 8}, {ApiKey: 18, MaxVersion: 3}}
			echoResponse(c, frame, r.AppendTo(nil))
			return
		}
		c.Close() // Metadata
	})
	env := startProxyWith(t, stub.addr(), nil, func(s *Server) { s.SetSasl(plainOriginator(t, "pw")) })
	err := env.srv.discover()
	if err == nil {
		t.Fatal("discovery worked against a bootstrap that closes its Metadata")
	}
	if errors.Is(err, cluster.ErrNeedsAuth) {
		t.Fatalf("taken for a bootstrap refusing an unauthenticated discovery: %v", err)
	}
}
