package tlsconf

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/testcerts"
)

// kafkaAPIVersions is the start of a plaintext Kafka client's first
// request (ApiVersions v3): what a client without TLS settings sends to a
// TLS port.
var kafkaAPIVersions = []byte{0, 0, 0, 0x1d, 0, 0x12, 0, 3, 0, 0, 0, 1, 0, 7, 'c', 'l', 'i', 'e', 'n', 't', '1'}

// Every result is found from a real handshake over 127.0.0.1, on the side
// that sees it.
func TestClassifyRealHandshakes(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	other := testcerts.NewCA(t, "other")
	server := ca.Server(t).TLS(t)
	expired := ca.Expired(t).TLS(t)
	trusting := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	serverCfg := &tls.Config{Certificates: []tls.Certificate{server}}
	mtlsCfg := &tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}

	// handshake runs one server handshake with cfg against client, and
	// returns the server's and the client's error.
	handshake := func(t *testing.T, cfg *tls.Config, timeout time.Duration, client func(addr string) error) (error, error) {
		addr, got := serve(t, cfg, timeout)
		cerr := client(addr)
		return next(t, got).err, cerr
	}
	tlsClient := func(cfg *tls.Config) func(string) error {
		return func(addr string) error {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			return greeted(c) // TLS 1.3 reports a refused client certificate here
		}
	}

	for _, tc := range []struct {
		name   string
		run    func(t *testing.T) (server, client error)
		side   string // whose error is classified
		result string
	}{
		{"ok", func(t *testing.T) (error, error) {
			return handshake(t, serverCfg, 10*time.Second, tlsClient(trusting))
		}, SideClient, ResultOK},
		{"plaintext Kafka on the TLS port", func(t *testing.T) (error, error) {
			return handshake(t, serverCfg, 10*time.Second, func(addr string) error {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Write(kafkaAPIVersions)
				return err
			})
		}, SideClient, ResultNotTLS},
		{"handshake never sent", func(t *testing.T) (error, error) {
			var keep net.Conn
			defer func() {
				if keep != nil {
					keep.Close()
				}
			}()
			return handshake(t, serverCfg, 50*time.Millisecond, func(addr string) error {
				c, err := net.Dial("tcp", addr)
				keep = c // stays open, silent, until the server gives up
				return err
			})
		}, SideClient, ResultTimeout},
		{"client closes before the handshake", func(t *testing.T) (error, error) {
			return handshake(t, serverCfg, 10*time.Second, func(addr string) error {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					c.Close()
				}
				return err
			})
		}, SideClient, ResultClosed},
		{"client without a required certificate (server)", func(t *testing.T) (error, error) {
			return handshake(t, mtlsCfg, 10*time.Second, tlsClient(trusting))
		}, SideClient, ResultNoClientCertificate},
		{"client without a required certificate (client)", func(t *testing.T) (error, error) {
			return handshake(t, mtlsCfg, 10*time.Second, tlsClient(trusting))
		}, SideUpstream, ResultNoClientCertificate},
		{"client certificate of an unknown CA", func(t *testing.T) (error, error) {
			pair := other.Client(t, "x").TLS(t)
			cfg := trusting.Clone()
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
			return handshake(t, mtlsCfg, 10*time.Second, tlsClient(cfg))
		}, SideClient, ResultUnknownCA},
		{"broker certificate of an unknown CA", func(t *testing.T) (error, error) {
			return handshake(t, serverCfg, 10*time.Second, tlsClient(&tls.Config{RootCAs: other.Pool(), ServerName: "localhost"}))
		}, SideUpstream, ResultUnknownCA},
		{"server certificate refused by the client (server)", func(t *testing.T) (error, error) {
			return handshake(t, serverCfg, 10*time.Second, tlsClient(&tls.Config{RootCAs: other.Pool(), ServerName: "localhost"}))
		}, SideClient, ResultBadCertificate},
		{"broker certificate for another name", func(t *testing.T) (error, error) {
			return handshake(t, serverCfg, 10*time.Second, tlsClient(&tls.Config{RootCAs: ca.Pool(), ServerName: "broker-0.kafka.example"}))
		}, SideUpstream, ResultNameMismatch},
		{"expired broker certificate", func(t *testing.T) (error, error) {
			return handshake(t, &tls.Config{Certificates: []tls.Certificate{expired}}, 10*time.Second, tlsClient(trusting))
		}, SideUpstream, ResultExpired},
		{"broker speaks plaintext", func(t *testing.T) (error, error) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err == nil {
					// Read the ClientHello, answer in plaintext (as a
					// Kafka broker's response would start), and close
					// only after the client has: a close with unread
					// input would reset the connection and race the
					// answer.
					c.Read(make([]byte, 512))
					c.Write(kafkaAPIVersions)
					io.Copy(io.Discard, c)
					c.Close()
				}
			}()
			return nil, tlsClient(trusting)(ln.Addr().String())
		}, SideUpstream, ResultNotTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serverErr, clientErr := tc.run(t)
			err := serverErr
			if tc.side == SideUpstream {
				err = clientErr
			}
			if got := ClassifyHandshakeError(err); got != tc.result {
				t.Fatalf("%v classified %q, want %q (server %v, client %v)", err, got, tc.result, serverErr, clientErr)
			}
		})
	}
}

// The plaintext-on-TLS case is counted and described the way the log line
// that closes the connection needs.
func TestHandshakeCountsAndDescribes(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	m, _ := newMetrics()
	addr, got := serve(t, &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS(t)}}, 10*time.Second)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(kafkaAPIVersions)
	defer c.Close()
	err = m.Handshake(SideClient, next(t, got).err)
	var he *HandshakeError
	if !errors.As(err, &he) || he.Result != ResultNotTLS {
		t.Fatalf("Handshake = %v, want a *HandshakeError with result not_tls", err)
	}
	if !strings.Contains(err.Error(), "client spoke plaintext Kafka (or another protocol) to a TLS listener") {
		t.Fatalf("error text %q does not say the client spoke plaintext", err)
	}
	if n := testutil.ToFloat64(m.handshakes.WithLabelValues(SideClient, ResultNotTLS)); n != 1 {
		t.Fatalf("handshakes{client,not_tls} = %v, want 1", n)
	}
	if err := m.Handshake(SideUpstream, nil); err != nil {
		t.Fatalf("Handshake(nil) = %v, want nil", err)
	}
	if n := testutil.ToFloat64(m.handshakes.WithLabelValues(SideUpstream, ResultOK)); n != 1 {
		t.Fatalf("handshakes{upstream,ok} = %v, want 1", n)
	}
	// Every series exists from the start, so rate() alerts see them.
	if n := testutil.CollectAndCount(m.handshakes); n != 2*len(Results) {
		t.Fatalf("%d handshake series, want %d", n, 2*len(Results))
	}
	var nilM *Metrics
	if err := nilM.Handshake(SideClient, errors.New("boom")); err == nil {
		t.Fatal("a nil *Metrics lost the error")
	}
}

// HandshakeConn bounds a handshake that never completes and counts it.
func TestHandshakeConnTimeout(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	silent, err := net.Dial("tcp", ln.Addr().String()) // connects, never says hello
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, _ := newMetrics()
	err = m.HandshakeConn(tls.Server(c, &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS(t)}}), SideClient, 50*time.Millisecond)
	var he *HandshakeError
	if !errors.As(err, &he) || he.Result != ResultTimeout {
		t.Fatalf("HandshakeConn = %v, want result timeout", err)
	}
	if n := testutil.ToFloat64(m.handshakes.WithLabelValues(SideClient, ResultTimeout)); n != 1 {
		t.Fatalf("handshakes{client,timeout} = %v, want 1", n)
	}
}
