package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/testcerts"
	"github.com/kproxy/kproxy/tlsconf"
)

// ping checks that a client with cfg is served through addr.
func ping(t *testing.T, addr string, cfg *tls.Config) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(addr)}
	if cfg != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("a good client is not served: %v", err)
	}
}

// closedByPeer waits for c to be closed by kproxy, reading what it sends.
func closedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(c); err != nil && !isReset(err) {
		t.Fatalf("connection not closed by kproxy: %v", err)
	}
}

func isReset(err error) bool { return strings.Contains(err.Error(), "connection reset") }

// Each bad input on a TLS listener closes only its own connection, with
// one log line naming the cause, and is counted by result; a good client
// is served meanwhile.
func TestTLSBadClients(t *testing.T) {
	sides := tlsSides{client: true, mutual: true}
	w := startTLSKfake(t, sides, []kfake.Opt{kfake.SeedTopics(1, "t")}, func(c *tlsconf.Config) {
		c.Listener.HandshakeTimeout = 300 * time.Millisecond
	})
	good := w.clientTLS(t, sides, "good-app")

	t.Run("plaintext Kafka on the TLS port", func(t *testing.T) {
		c := dialRaw(t, w.addr)
		if _, err := c.Write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
			t.Fatal(err)
		}
		closedByPeer(t, c)
		w.waitHandshakes(t, "client", tlsconf.ResultNotTLS, 1)
		waitFor(t, 10*time.Second, "the cause logged", func() bool {
			return w.logs.contains("client spoke plaintext Kafka (or another protocol) to a TLS listener")
		})
	})
	t.Run("handshake never completes", func(t *testing.T) {
		c := dialRaw(t, w.addr) // says nothing
		closedByPeer(t, c)
		w.waitHandshakes(t, "client", tlsconf.ResultTimeout, 1)
	})
	t.Run("no client certificate", func(t *testing.T) {
		cfg := &tls.Config{RootCAs: w.ca.Pool()}
		if err := tlsPing(w.addr, cfg); err == nil {
			t.Fatal("a client without a certificate was served under mTLS")
		}
		w.waitHandshakes(t, "client", tlsconf.ResultNoClientCertificate, 1)
	})
	t.Run("client certificate from an unknown CA", func(t *testing.T) {
		other := testcerts.NewCA(t, "someone else")
		cert := other.Client(t, "intruder").TLS(t)
		// Sent whatever CAs kproxy asks for: Go's client would send a
		// static certificate only to a server that names its CA.
		cfg := &tls.Config{RootCAs: w.ca.Pool(),
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }}
		if err := tlsPing(w.addr, cfg); err == nil {
			t.Fatal("a client certificate from an unknown CA was accepted")
		}
		w.waitHandshakes(t, "client", tlsconf.ResultUnknownCA, 1)
	})
	t.Run("kproxy's certificate from an unknown CA", func(t *testing.T) {
		other := testcerts.NewCA(t, "someone else")
		cfg := &tls.Config{RootCAs: other.Pool(), Certificates: good.Certificates}
		if err := tlsPing(w.addr, cfg); err == nil {
			t.Fatal("the client trusted kproxy's certificate without its CA")
		}
	})
	ping(t, w.addr, good)
	if n := w.opened(); n > 1 {
		t.Fatalf("%v pairs open after the bad clients left", n)
	}
}

// tlsPing runs one ApiVersions over TLS with cfg and reports the first
// error: the handshake's, or the read's (TLS 1.3 refuses a client
// certificate after the client's handshake is done).
func tlsPing(addr string, cfg *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 7)); err != nil {
		return err
	}
	var size [4]byte
	_, err = io.ReadFull(c, size[:])
	return err
}

// A broker whose certificate is not for the name kproxy dials: the
// client is reset, the handshake counted and its cause logged, and
// readiness says why.
func TestTLSUpstreamNameMismatch(t *testing.T) {
	w := startTLSKfake(t, tlsSides{upstream: true}, nil, func(c *tlsconf.Config) {
		c.Upstream.ServerName = "not-the-broker.example"
	})
	// kproxy resets the client as soon as the upstream handshake fails,
	// which on loopback can be before the client's connect returns.
	if c, err := net.DialTimeout("tcp", w.addr, 5*time.Second); err == nil {
		c.Write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
		closedByPeer(t, c)
		c.Close()
	} else if !isReset(err) {
		t.Fatal(err)
	}
	w.waitHandshakes(t, "upstream", tlsconf.ResultNameMismatch, 1)
	waitFor(t, 10*time.Second, "the cause logged", func() bool { return w.logs.contains("not for the name dialled") })
	err := w.srv.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not-the-broker.example") {
		t.Fatalf("Ready = %v, want the handshake's failure", err)
	}
}

// A certificate rotated the way Kubernetes updates a Secret is used by
// the next handshake, while a connection opened before keeps relaying.
func TestTLSRotationUnderLiveConnections(t *testing.T) {
	sides := tlsSides{client: true}
	w := startTLSKfake(t, sides, nil, nil)
	cfg := w.clientTLS(t, sides, "")
	before, err := tls.Dial("tcp", w.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	oldSerial := before.ConnectionState().PeerCertificates[0].SerialNumber

	next := w.ca.Server(t)
	w.listener.Update(t, testcerts.Files(next, w.ca))
	if err := w.store.Reload(); err != nil {
		t.Fatal(err)
	}
	after, err := tls.Dial("tcp", w.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if got := after.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(next.Serial()) != 0 {
		t.Fatalf("new connection got serial %v, want the rotated %v (old %v)", got, next.Serial(), oldSerial)
	}
	for _, c := range []*tls.Conn{before, after} {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 3)); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			t.Fatalf("connection stopped relaying after the rotation: %v", err)
		}
	}
}
