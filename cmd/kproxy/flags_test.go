package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/testcerts"
)

// TestFlagsWinOverTheFileEvenWhenEmpty: a flag left out keeps the file's
// value, and a flag given empty clears it (--admin "" turns admin off).
func TestFlagsWinOverTheFileEvenWhenEmpty(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kproxy.yaml")
	body := "proxy:\n  upstream: 127.0.0.1:9092\nadmin:\n  listen: 127.0.0.1:9999\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		admin    string
		upstream string
	}{
		{args: nil, admin: "127.0.0.1:9999", upstream: "127.0.0.1:9092"},
		{args: []string{"--admin", ""}, admin: "", upstream: "127.0.0.1:9092"},
		{args: []string{"--admin=127.0.0.1:1234", "--upstream", "10.0.0.1:9092"}, admin: "127.0.0.1:1234", upstream: "10.0.0.1:9092"},
	} {
		o, err := parseFlags("run", append([]string{"--config", file}, tc.args...), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		f, _, err := o.load()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if f.Admin.Listen != tc.admin || f.Proxy.Upstream != tc.upstream {
			t.Errorf("%v: admin %q upstream %q, want %q and %q", tc.args, f.Admin.Listen, f.Proxy.Upstream, tc.admin, tc.upstream)
		}
	}
}

// TestTLSFlagsTurnTheListenerOn: --tls-cert and --tls-key give the
// listener a certificate over a file without a tls: section (the injected
// sidecar's case), keep the rest of a file's tls.listener, and validate
// loads the files they name.
func TestTLSFlagsTurnTheListenerOn(t *testing.T) {
	ca := testcerts.NewCA(t, "flags CA")
	dir := t.TempDir()
	crt, key := ca.Server(t).Write(t, dir, "tls.crt", "tls.key")
	plain := filepath.Join(dir, "plain.yaml")
	writeFile(t, plain, "proxy:\n  upstream: 127.0.0.1:9092\n")
	mtls := filepath.Join(dir, "mtls.yaml")
	writeFile(t, mtls, "proxy:\n  upstream: 127.0.0.1:9092\ntls:\n  listener:\n    cert_file: /nowhere.crt\n    key_file: /nowhere.key\n    client_ca_file: /etc/ca.crt\n")

	o, err := parseFlags("run", []string{"--config", plain}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f, _, err := o.load(); err != nil || f.TLS.Listener != nil {
		t.Fatalf("no TLS flag: listener %+v (%v), want plaintext", f.TLS.Listener, err)
	}
	for _, file := range []string{plain, mtls} {
		o, err := parseFlags("run", []string{"--config", file, "--tls-cert", crt, "--tls-key", key}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		f, root, err := o.load()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Validate(file, root); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		l := f.TLS.Listener
		if l == nil || l.CertFile != crt || l.KeyFile != key {
			t.Fatalf("%s: listener %+v, want the flags' files", file, l)
		}
		if file == mtls && l.ClientCAFile != "/etc/ca.crt" {
			t.Errorf("client_ca_file %q: the file's value must stay", l.ClientCAFile)
		}
	}
	if _, err := parseFlags("demo", []string{"--tls-cert", crt}, io.Discard); err == nil {
		t.Error("demo took --tls-cert; its listener is its own")
	}

	r := kproxy(t, 10*time.Second, "validate", "--config", plain, "--tls-cert", crt, "--tls-key", key)
	if r.code != 0 {
		t.Errorf("validate with the TLS flags: exit %d, stderr %q", r.code, r.stderr)
	}
	_, otherKey := ca.Server(t).Write(t, dir, "other.crt", "other.key")
	r = kproxy(t, 10*time.Second, "validate", "--config", plain, "--tls-cert", crt, "--tls-key", otherKey)
	if r.code == 0 || !strings.Contains(r.stderr, "listener.key_file") {
		t.Errorf("validate with a key not matching: exit %d, stderr %q, want listener.key_file named", r.code, r.stderr)
	}
}
