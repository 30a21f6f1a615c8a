package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/embedded"
	"github.com/kproxy/kproxy/internal/testcerts"
)

// validate loads the TLS files as kproxy run would, and names the field
// and file of one that does not load.
func TestValidateTLSFiles(t *testing.T) {
	ca := testcerts.NewCA(t, "validate CA")
	dir := t.TempDir()
	crt, key := ca.Server(t).Write(t, dir, "tls.crt", "tls.key")
	_, otherKey := ca.Server(t).Write(t, dir, "other.crt", "other.key")
	for _, c := range []struct {
		key, want string
		ok        bool
	}{{key, "", true}, {otherKey, "listener.key_file", false}} {
		path := filepath.Join(dir, "kproxy.yaml")
		writeFile(t, path, "proxy:\n  upstream: b:9092\ntls:\n  listener:\n    cert_file: "+crt+"\n    key_file: "+c.key+"\n")
		r := kproxy(t, 10*time.Second, "validate", "--config", path)
		if c.ok != (r.code == 0) || !strings.Contains(r.stderr, c.want) || (!c.ok && !strings.Contains(r.stderr, c.key)) {
			t.Errorf("key %s: exit %d, stderr %q, want ok=%v naming %q", c.key, r.code, r.stderr, c.ok, c.want)
		}
	}
}

// kproxy run with tls.listener and tls.upstream: a TLS client produces and
// consumes through it to a TLS broker, and /metrics counts the handshakes
// and shows when the certificates expire.
func TestRunTLSBothSides(t *testing.T) {
	ca := testcerts.NewCA(t, "run CA")
	dir := t.TempDir()
	crt, key := ca.Server(t).Write(t, dir, "tls.crt", "tls.key")
	caFile := filepath.Join(dir, "ca.crt")
	testcerts.WriteFile(t, caFile, ca.CertPEM)
	listen, admin := freeAddr(t), freeAddr(t)
	b, err := embedded.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := b.Start(listen, kfake.SeedTopics(1, "tls"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS(t)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cfg := filepath.Join(dir, "kproxy.yaml")
	writeFile(t, cfg, "proxy:\n  listen: "+listen+"\n  upstream: "+b.Addr()+"\nadmin:\n  listen: "+admin+
		"\ntls:\n  listener:\n    cert_file: "+crt+"\n    key_file: "+key+"\n  upstream:\n    ca_file: "+caFile+"\n")
	var out lockedBuffer
	cmd := exec.Command(bin, "run", "--config", cfg)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	waitReady(t, admin, &out)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(listen), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool()}),
		kgo.DefaultProduceTopic("tls"), kgo.ConsumeTopics("tls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v\n%s", err, out.String())
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil || fs.NumRecords() != 1 || string(fs.Records()[0].Value) != "over tls" {
		t.Fatalf("consume: %v, %d records", err, fs.NumRecords())
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`kproxy_tls_handshakes_total{result="ok",side="client"}`, `kproxy_tls_handshakes_total{result="ok",side="upstream"}`,
		`kproxy_tls_certificate_expiry_timestamp_seconds{file="` + crt + `",side="client"}`} {
		if !strings.Contains(string(body), want) || strings.Contains(string(body), want+" 0\n") {
			t.Errorf("/metrics has no (non-zero) %s", want)
		}
	}
}

// waitReady waits until kproxy's /readyz answers 200.
func waitReady(t *testing.T, admin string, out *lockedBuffer) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 20s (last: %v)\noutput:\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
