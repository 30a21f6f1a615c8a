package tlsconf

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/testcerts"
)

// upstreamOn is a tls.upstream config trusting dir's ca.crt and, when
// dir has tls.crt, presenting it.
func upstreamOn(dir *testcerts.SecretDir, withCert bool) *Upstream {
	u := &Upstream{CAFile: dir.Path("ca.crt")}
	if withCert {
		u.CertFile, u.KeyFile = dir.Path("tls.crt"), dir.Path("tls.key")
	}
	return u
}

// Dialling the broker: its certificate is checked against ca_file and the
// host dialled, the client certificate is sent when the broker asks, and
// both reload.
func TestClientConfigMTLSAndRotation(t *testing.T) {
	brokerCA, clientCA := testcerts.NewCA(t, "broker-ca"), testcerts.NewCA(t, "client-ca")
	first, second := clientCA.Client(t, "kproxy-1"), clientCA.Client(t, "kproxy-2")
	dir := testcerts.NewSecretDir(t, testcerts.Files(first, brokerCA))
	_, log := newLog()
	s := newStore(t, Config{Upstream: upstreamOn(dir, true)}, nil, log)
	addr, got := serve(t, &tls.Config{Certificates: []tls.Certificate{brokerCA.Server(t).TLS(t)},
		ClientCAs: clientCA.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}, 10*time.Second)

	cfg := s.ClientConfig(addr)
	if cfg.ServerName != "127.0.0.1" {
		t.Fatalf("ServerName %q, want the host dialled", cfg.ServerName)
	}
	if _, err := dial(t, addr, cfg); err != nil {
		t.Fatalf("dial: %v", err)
	}
	if a := next(t, got); a.err != nil || a.state.PeerCertificates[0].SerialNumber.Cmp(first.Serial()) != 0 {
		t.Fatalf("broker saw %v / %v, want the first client certificate", a.err, a.state.PeerCertificates)
	}

	// Rotate the client certificate and the broker CA at once: the broker
	// now presents a certificate of a new CA.
	newBrokerCA := testcerts.NewCA(t, "broker-ca-2")
	dir.Update(t, testcerts.Files(second, newBrokerCA))
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if _, err := dial(t, addr, s.ClientConfig(addr)); ClassifyHandshakeError(err) != ResultUnknownCA {
		t.Fatalf("old broker certificate after the CA rotation: %v, want %s", err, ResultUnknownCA)
	}
	next(t, got)
	addr2, got2 := serve(t, &tls.Config{Certificates: []tls.Certificate{newBrokerCA.Server(t).TLS(t)},
		ClientCAs: clientCA.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}, 10*time.Second)
	if _, err := dial(t, addr2, s.ClientConfig(addr2)); err != nil {
		t.Fatalf("dial the new broker: %v", err)
	}
	if a := next(t, got2); a.err != nil || a.state.PeerCertificates[0].SerialNumber.Cmp(second.Serial()) != 0 {
		t.Fatalf("broker saw %v, want the second client certificate", a.err)
	}
}

// server_name overrides the host for both the check and SNI; without
// client certificate files none is offered; insecure_skip_verify is
// passed on and warned about once at start.
func TestClientConfigFields(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	dir := testcerts.NewSecretDir(t, testcerts.Files(ca.Server(t), ca))
	logs, log := newLog()
	u := upstreamOn(dir, false)
	u.ServerName = "localhost"
	s := newStore(t, Config{Upstream: u}, nil, log)
	var sni string
	addr, got := serve(t, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni = h.ServerName
		return nil, nil
	}, Certificates: []tls.Certificate{ca.Server(t).TLS(t)}}, 10*time.Second)
	cfg := s.ClientConfig(addr)
	if cfg.GetClientCertificate != nil {
		t.Fatal("a client certificate callback without upstream.cert_file")
	}
	if _, err := dial(t, addr, cfg); err != nil {
		t.Fatalf("dial with server_name: %v", err)
	}
	if a := next(t, got); a.err != nil || sni != "localhost" {
		t.Fatalf("server %v, SNI %q; want SNI localhost", a.err, sni)
	}
	if lines := logs.lines(); len(lines) != 0 {
		t.Fatalf("log %q, want nothing without insecure_skip_verify", lines)
	}

	logs, log = newLog()
	s = newStore(t, Config{Upstream: &Upstream{InsecureSkipVerify: true}}, nil, log)
	if cfg := s.ClientConfig("broker-0.kafka:9093"); !cfg.InsecureSkipVerify || cfg.ServerName != "broker-0.kafka" || cfg.RootCAs != nil {
		t.Fatalf("insecure config %+v, want InsecureSkipVerify, ServerName broker-0.kafka, system roots", cfg)
	}
	if lines := logs.lines(); len(lines) != 1 || !strings.Contains(lines[0], "insecure_skip_verify") || !strings.Contains(lines[0], `"level":"warn"`) {
		t.Fatalf("log %q, want one warning naming insecure_skip_verify", lines)
	}
}

// Without a side configured there is no config for it.
func TestConfigsNilWhenPlaintext(t *testing.T) {
	_, log := newLog()
	s := newStore(t, Config{}, nil, log)
	if s.ServerConfig() != nil || s.ClientConfig("b:9092") != nil {
		t.Fatal("configs handed out for sides that are plaintext")
	}
}

// A client certificate under client_auth none is never asked for, so it
// gives no identity even when sent.
func TestIdentitiesNeedVerification(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	dir := testcerts.NewSecretDir(t, testcerts.Files(ca.Server(t), nil))
	_, log := newLog()
	s := newStore(t, Config{Listener: listenerOn(dir)}, nil, log)
	addr, got := serve(t, s.ServerConfig(), 10*time.Second)
	pair := ca.Client(t, "app", "spiffe://cluster.local/ns/a/sa/b").TLS(t)
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost",
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}
	if _, err := dial(t, addr, cfg); err != nil {
		t.Fatalf("dial: %v", err)
	}
	if a := next(t, got); a.err != nil || Identities(a.state) != nil || Principal(a.state) != "" {
		t.Fatalf("server %v, identities %q; want none", a.err, Identities(a.state))
	}
}

// A nil *Store is plaintext on both sides, so a driver needs no second
// case.
func TestNilStore(t *testing.T) {
	var s *Store
	if s.ServerConfig() != nil || s.ClientConfig("b:9092") != nil || s.Reload() != nil || s.Serial() != "" {
		t.Fatal("a nil Store handed out TLS")
	}
	s.Close()
}
