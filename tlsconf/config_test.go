package tlsconf

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/fielderr"
	"github.com/kproxy/kproxy/internal/testcerts"
)

func TestValidate(t *testing.T) {
	l := func(f func(*Listener)) Config {
		c := Defaults()
		c.Listener = &Listener{CertFile: "c", KeyFile: "k"}
		f(c.Listener)
		return c
	}
	u := func(f func(*Upstream)) Config {
		c := Defaults()
		c.Upstream = &Upstream{}
		f(c.Upstream)
		return c
	}
	for _, tc := range []struct {
		c     Config
		field string
	}{
		{Defaults(), ""},
		{l(func(*Listener) {}), ""},
		{l(func(l *Listener) { l.ClientCAFile, l.ClientAuth, l.MinVersion = "ca", "request", "1.3" }), ""},
		{u(func(*Upstream) {}), ""},
		{u(func(u *Upstream) { u.CertFile, u.KeyFile, u.ServerName = "c", "k", "b" }), ""},
		{Config{}, "reload_interval"},
		{l(func(l *Listener) { l.CertFile = "" }), "listener.cert_file"},
		{l(func(l *Listener) { l.KeyFile = "" }), "listener.key_file"},
		{l(func(l *Listener) { l.ClientAuth = "optional" }), "listener.client_auth"},
		{l(func(l *Listener) { l.ClientAuth = "require" }), "listener.client_auth"},
		{l(func(l *Listener) { l.ClientAuth = "request" }), "listener.client_auth"},
		{l(func(l *Listener) { l.MinVersion = "1.1" }), "listener.min_version"},
		{l(func(l *Listener) { l.MinVersion = "1.0" }), "listener.min_version"},
		{l(func(l *Listener) { l.HandshakeTimeout = -time.Second }), "listener.handshake_timeout"},
		{u(func(u *Upstream) { u.CertFile = "c" }), "upstream.key_file"},
		{u(func(u *Upstream) { u.KeyFile = "k" }), "upstream.cert_file"},
		{u(func(u *Upstream) { u.HandshakeTimeout = -1 }), "upstream.handshake_timeout"},
	} {
		err := tc.c.Validate()
		var fe *fielderr.Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tc.c, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%+v: %v, want an error on %s", tc.c, err, tc.field)
		}
	}
}

func TestDefaultsInForce(t *testing.T) {
	l := &Listener{}
	// A client's handshake gets 5s by default (issue 27: half-open
	// handshakes held their slot for the whole bound); the broker's 10s.
	if l.Mode() != ClientAuthNone || l.Timeout() != 5*time.Second || (&Upstream{}).Timeout() != 10*time.Second {
		t.Fatalf("no client CA: mode %q timeout %v, want none and 5s (upstream 10s)", l.Mode(), l.Timeout())
	}
	l.ClientCAFile = "ca"
	if l.Mode() != ClientAuthRequire {
		t.Fatalf("client CA: mode %q, want require", l.Mode())
	}
	l.ClientAuth = ClientAuthRequest
	if l.Mode() != ClientAuthRequest {
		t.Fatalf("explicit request: mode %q", l.Mode())
	}
	if (&Upstream{HandshakeTimeout: time.Second}).Timeout() != time.Second {
		t.Fatal("upstream handshake_timeout not in force")
	}
	if (Config{}).Enabled() || !(Config{Upstream: &Upstream{}}).Enabled() {
		t.Fatal("Enabled wrong")
	}
}

// Check (kproxy validate) opens every file and names the field and the
// file of the first problem.
func TestCheckFiles(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		testcerts.WriteFile(t, p, data)
		return p
	}
	good := ca.Server(t)
	crt, key := good.Write(t, dir, "tls.crt", "tls.key")
	caFile := write("ca.crt", ca.CertPEM)
	badKey := write("other.key", good.WithOtherKey(t).KeyPEM)
	exp := ca.Expired(t)
	expCrt, expKey := exp.Write(t, dir, "expired.crt", "expired.key")
	garbage := write("garbage.pem", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	missing := filepath.Join(dir, "missing.crt")

	for _, tc := range []struct {
		name  string
		c     Config
		field string
		file  string
		msg   string
	}{
		{"all good", Config{Listener: &Listener{CertFile: crt, KeyFile: key, ClientCAFile: caFile},
			Upstream: &Upstream{CAFile: caFile, CertFile: crt, KeyFile: key}}, "", "", ""},
		{"missing certificate", Config{Listener: &Listener{CertFile: missing, KeyFile: key}}, "listener.cert_file", missing, "no such file"},
		{"key of another certificate", Config{Listener: &Listener{CertFile: crt, KeyFile: badKey}}, "listener.key_file", badKey, "does not match"},
		{"expired", Config{Listener: &Listener{CertFile: expCrt, KeyFile: expKey}}, "listener.cert_file", expCrt, "expired"},
		{"unparsable client CA", Config{Listener: &Listener{CertFile: crt, KeyFile: key, ClientCAFile: garbage}}, "listener.client_ca_file", garbage, "certificate 1"},
		{"CA file with no certificate", Config{Upstream: &Upstream{CAFile: key}}, "upstream.ca_file", key, "no PEM certificate"},
		{"upstream client pair", Config{Upstream: &Upstream{CertFile: crt, KeyFile: badKey}}, "upstream.key_file", badKey, "does not match"},
	} {
		err := tc.c.Check(time.Now())
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want nil", tc.name, err)
			}
			continue
		}
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.file) || !strings.Contains(fe.Msg, tc.msg) {
			t.Errorf("%s: %v, want an error on %s naming %s and saying %q", tc.name, err, tc.field, tc.file, tc.msg)
		}
	}
}
