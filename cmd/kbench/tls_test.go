package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/config"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/tlsconf"
)

// testTLSBroker is a null broker speaking TLS with certificates made in
// a temp dir, as compare --tls makes them.
func testTLSBroker(t *testing.T) (*nullBroker, *benchCerts) {
	t.Helper()
	dir := t.TempDir()
	if err := writeCerts(dir); err != nil {
		t.Fatal(err)
	}
	certs, err := loadCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := startBroker(brokerConfig{Listen: "127.0.0.1:0", Partitions: 1, TLS: certs.serverConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	return b, certs
}

// testTLSKproxy runs kproxy in-process with the tls section compare
// writes for the kproxy it starts, parsed and validated as kproxy run does.
func testTLSKproxy(t *testing.T, certs *benchCerts, upstream string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kproxy.yaml")
	if err := os.WriteFile(path, []byte(tlsKproxyConfig(certs)), 0o600); err != nil {
		t.Fatal(err)
	}
	file, root, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	file.Proxy.Listen, file.Proxy.Upstream = "127.0.0.1:0", upstream // compare passes them as flags
	if err := file.Validate(path, root); err != nil {
		t.Fatalf("compare's kproxy config: %v", err)
	}
	if file.TLS.Listener == nil || file.TLS.Upstream == nil {
		t.Fatalf("compare's kproxy config leaves a side plaintext: %+v", file.TLS)
	}
	if err := proxy.ConfigureNetpoll(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	tm := tlsconf.NewMetrics(reg)
	store, err := tlsconf.New(file.TLS, tm, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	cfg := file.Proxy
	cfg.DrainTimeout = 2 * time.Second
	srv, err := proxy.New(cfg, framing.Defaults(), correlate.Defaults(), zerolog.Nop(), proxy.NewMetrics(reg), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetTLS(store, tm)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		srv.Drain(ctx)
	})
	return srv.Addr().String()
}

// TestLoadTLSDirect drives the TLS null broker over TLS; the load
// verifies the broker's certificate against the run's CA.
func TestLoadTLSDirect(t *testing.T) {
	b, certs := testTLSBroker(t)
	cfg := shortLoad(b.Addr())
	cfg.TLS = certs.clientConfig()
	res, err := runLoad(cfg)
	checkLoad(t, res, err)
}

// TestLoadTLSThroughKproxy is compare --tls's kproxy path: TLS from the
// load to kproxy, and from kproxy to the broker.
func TestLoadTLSThroughKproxy(t *testing.T) {
	b, certs := testTLSBroker(t)
	cfg := shortLoad(testTLSKproxy(t, certs, b.Addr()))
	cfg.TLS = certs.clientConfig()
	res, err := runLoad(cfg)
	checkLoad(t, res, err)
}

// TestLoadTLSRefusesUnknownCA: a load with the wrong CA must not measure
// anything, so a TLS figure is never one of an unverified hop.
func TestLoadTLSRefusesUnknownCA(t *testing.T) {
	b, _ := testTLSBroker(t)
	other := t.TempDir()
	if err := writeCerts(other); err != nil {
		t.Fatal(err)
	}
	wrong, err := loadCerts(other)
	if err != nil {
		t.Fatal(err)
	}
	cfg := shortLoad(b.Addr())
	cfg.TLS = wrong.clientConfig()
	_, err = runLoad(cfg)
	var unknown x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &unknown) {
		t.Fatalf("load with another CA: %v, want an unknown authority error", err)
	}
}

// TestLoadPlaintextToTLSBrokerFails: a load without --tls against a TLS
// broker fails rather than reporting figures.
func TestLoadPlaintextToTLSBrokerFails(t *testing.T) {
	b, _ := testTLSBroker(t)
	cfg := shortLoad(b.Addr())
	cfg.Duration = 2 * time.Second
	if _, err := runLoad(cfg); err == nil {
		t.Fatal("plaintext load against a TLS broker reported no error")
	}
}

// TestCertsCmdWritesHAProxyPEM: kbench certs writes every file, and
// tls.pem (HAProxy's crt) holds the pair tls.crt and tls.key hold.
func TestCertsCmdWritesHAProxyPEM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	if err := certsCmd([]string{"--dir", dir}); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(dir, certPEM))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(pem, pem); err != nil {
		t.Fatalf("%s is not a certificate and its key: %v", certPEM, err)
	}
	if _, err := loadCerts(dir); err != nil {
		t.Fatal(err)
	}
}

// TestLoadTLSThroughKproxyLargeFrames is the 1 MiB shape through kproxy
// with TLS on both sides: frames larger than a TLS record, and than the
// stream driver's write chunk, arrive whole and in order.
func TestLoadTLSThroughKproxyLargeFrames(t *testing.T) {
	b, certs := testTLSBroker(t)
	cfg := shortLoad(testTLSKproxy(t, certs, b.Addr()))
	cfg.TLS = certs.clientConfig()
	// The request budget ends the run, not the clock: a loaded machine
	// may take more than a second for 40 MiB under -race.
	cfg.Size, cfg.Depth, cfg.MaxRequests, cfg.Duration = 1<<20, 2, 40, time.Minute
	res, err := runLoad(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 40 || res.FrameLen != 1<<20 {
		t.Fatalf("%d requests of %d bytes, want 40 of %d", res.Requests, res.FrameLen, 1<<20)
	}
}
