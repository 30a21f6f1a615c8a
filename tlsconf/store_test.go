package tlsconf

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/testcerts"
)

// listenerOn is a tls.listener config over a Secret-like directory.
func listenerOn(d *testcerts.SecretDir) *Listener {
	return &Listener{CertFile: d.Path("tls.crt"), KeyFile: d.Path("tls.key")}
}

// A rotation the kubelet's way (swap ..data): a new handshake sees the new
// certificate, a connection opened before keeps relaying.
func TestRotationSwapsCertificate(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	first, second := ca.Server(t), ca.Server(t)
	dir := testcerts.NewSecretDir(t, testcerts.Files(first, nil))
	m, _ := newMetrics()
	logs, log := newLog()
	s := newStore(t, Config{Listener: listenerOn(dir)}, m, log)
	addr, _ := serve(t, s.ServerConfig(), 10*time.Second)
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	if l := logs.infos(); len(l) != 1 || !strings.Contains(l[0], first.Serial().Text(16)) {
		t.Fatalf("start-up log %q, want one line naming the serial in force", l)
	}

	before, err := dial(t, addr, client)
	if err != nil {
		t.Fatalf("dial before: %v", err)
	}
	if got := before.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(first.Serial()) != 0 {
		t.Fatalf("before the swap: serial %v, want %v", got, first.Serial())
	}

	dir.Update(t, testcerts.Files(second, nil))
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	after, err := dial(t, addr, client)
	if err != nil {
		t.Fatalf("dial after: %v", err)
	}
	if got := after.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(second.Serial()) != 0 {
		t.Fatalf("after the swap: serial %v, want %v", got, second.Serial())
	}
	if err := echo(before, "still here"); err != nil {
		t.Fatalf("connection opened before the swap: %v", err)
	}
	if got := testutil.ToFloat64(m.reloads.WithLabelValues(SideClient, "ok")); got != 1 {
		t.Fatalf("reloads ok = %v, want 1", got)
	}
	if l := logs.infos(); len(l) != 2 || !strings.Contains(l[1], "reloaded") || !strings.Contains(l[1], second.Serial().Text(16)) {
		t.Fatalf("log %q, want a reload line naming the new serial", l)
	}
	if got, want := testutil.ToFloat64(m.expiryTS.WithLabelValues(SideClient, dir.Path("tls.crt"))), float64(second.Cert.NotAfter.Unix()); got != want {
		t.Fatalf("expiry gauge = %v, want the new certificate's %v", got, want)
	}
	// Nothing changed since: a reload is a no-op and counts nothing.
	if err := s.Reload(); err != nil {
		t.Fatalf("second Reload: %v", err)
	}
	if got := testutil.ToFloat64(m.reloads.WithLabelValues(SideClient, "ok")); got != 1 {
		t.Fatalf("reloads ok after an idle reload = %v, want 1", got)
	}
}

// The watcher finds the swap by itself.
func TestWatcherReloads(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	first, second := ca.Server(t), ca.Server(t)
	dir := testcerts.NewSecretDir(t, testcerts.Files(first, nil))
	_, log := newLog()
	s := newStore(t, Config{Listener: listenerOn(dir), ReloadInterval: 10 * time.Millisecond}, nil, log)
	if s.Serial() != first.Serial().Text(16) {
		t.Fatalf("serial %s, want %s", s.Serial(), first.Serial().Text(16))
	}
	dir.Update(t, testcerts.Files(second, nil))
	deadline := time.Now().Add(30 * time.Second)
	for s.Serial() != second.Serial().Text(16) {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher never loaded the new certificate (serial still %s)", s.Serial())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A bad pair (key not matching, expired, unparsable) is refused: the old
// certificate stays in force, one log line names the field, and the
// counter says so.
func TestBadPairRefused(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	good := ca.Server(t)
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		field string
		msg   string
	}{
		{"key not matching", testcerts.Files(ca.Server(t).WithOtherKey(t), nil), "listener.key_file", "does not match"},
		{"expired", testcerts.Files(ca.Expired(t), nil), "listener.cert_file", "expired"},
		{"unparsable", map[string][]byte{"tls.crt": []byte("not a certificate"), "tls.key": good.KeyPEM}, "listener.cert_file", "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testcerts.NewSecretDir(t, testcerts.Files(good, nil))
			m, _ := newMetrics()
			logs, log := newLog()
			s := newStore(t, Config{Listener: listenerOn(dir)}, m, log)
			addr, _ := serve(t, s.ServerConfig(), 10*time.Second)

			dir.Update(t, tc.files)
			err := s.Reload()
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Reload = %v, want an error saying %q", err, tc.msg)
			}
			if got := testutil.ToFloat64(m.reloads.WithLabelValues(SideClient, "error")); got != 1 {
				t.Fatalf("reloads error = %v, want 1", got)
			}
			lines := logs.lines()
			if len(lines) != 1 || !strings.Contains(lines[0], `"field":"tls.`+tc.field+`"`) || !strings.Contains(lines[0], tc.msg) {
				t.Fatalf("log = %q, want one line naming tls.%s and %q", lines, tc.field, tc.msg)
			}
			c, err := dial(t, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
			if err != nil {
				t.Fatalf("dial after the refused reload: %v", err)
			}
			if got := c.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(good.Serial()) != 0 {
				t.Fatalf("serial %v, want the old certificate's %v", got, good.Serial())
			}
			// The same bad content is not refused again on every poll.
			if err := s.Reload(); err != nil {
				t.Fatalf("Reload of unchanged bad files = %v, want nil", err)
			}
			if n := len(logs.lines()); n != 1 {
				t.Fatalf("%d log lines after a second poll, want 1", n)
			}
		})
	}
}

// Bad material at start is an error, not a listener without a certificate.
func TestNewRefusesBadFiles(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	dir := testcerts.NewSecretDir(t, testcerts.Files(ca.Server(t).WithOtherKey(t), nil))
	_, log := newLog()
	c := Config{Listener: listenerOn(dir), ReloadInterval: time.Hour}
	if s, err := New(c, nil, log); err == nil {
		s.Close()
		t.Fatal("New accepted a key that does not match its certificate")
	} else if !strings.Contains(err.Error(), dir.Path("tls.key")) {
		t.Fatalf("New = %v, want the key file named", err)
	}
}

// client_auth: require refuses a client without a certificate and one from
// another CA; request lets the first in without an identity; a good
// client certificate gives its identities.
func TestClientAuthModes(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	other := testcerts.NewCA(t, "other")
	dir := testcerts.NewSecretDir(t, testcerts.Files(ca.Server(t), ca))
	good := ca.Client(t, "payments-api", "spiffe://cluster.local/ns/payments/sa/api")
	stranger := other.Client(t, "intruder")
	anon := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	// GetClientCertificate sends the certificate whatever CAs the server
	// names; with Certificates, crypto/tls would keep back one from a CA
	// the server does not list.
	with := func(c *testcerts.Cert) *tls.Config {
		cfg := anon.Clone()
		pair := c.TLS(t)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		return cfg
	}
	for _, mode := range []string{"", ClientAuthRequire, ClientAuthRequest} {
		t.Run("mode="+mode, func(t *testing.T) {
			l := listenerOn(dir)
			l.ClientCAFile, l.ClientAuth = dir.Path("ca.crt"), mode
			m, _ := newMetrics()
			_, log := newLog()
			s := newStore(t, Config{Listener: l}, m, log)
			addr, got := serve(t, s.ServerConfig(), 10*time.Second)

			_, err := dial(t, addr, anon)
			a := next(t, got)
			if mode == ClientAuthRequest {
				if err != nil || a.err != nil || Identities(a.state) != nil {
					t.Fatalf("request, no certificate: client %v, server %v, identities %v; want a connection with no identity", err, a.err, Identities(a.state))
				}
			} else if err == nil || ClassifyHandshakeError(a.err) != ResultNoClientCertificate {
				t.Fatalf("require, no certificate: client %v, server %v (%s); want refused as %s", err, a.err, ClassifyHandshakeError(a.err), ResultNoClientCertificate)
			}

			_, err = dial(t, addr, with(stranger))
			a = next(t, got)
			if err == nil || ClassifyHandshakeError(a.err) != ResultUnknownCA {
				t.Fatalf("other CA: client %v, server %v (%s); want refused as %s", err, a.err, ClassifyHandshakeError(a.err), ResultUnknownCA)
			}
			if ClassifyHandshakeError(err) != ResultUnknownCA {
				t.Fatalf("other CA, client side: %v classified %s, want %s", err, ClassifyHandshakeError(err), ResultUnknownCA)
			}

			_, err = dial(t, addr, with(good))
			a = next(t, got)
			if err != nil || a.err != nil {
				t.Fatalf("good certificate: client %v, server %v", err, a.err)
			}
			ids := Identities(a.state)
			if len(ids) != 2 || ids[0] != "spiffe://cluster.local/ns/payments/sa/api" || ids[1] != "payments-api" {
				t.Fatalf("identities %q, want the URI SAN then the CN", ids)
			}
			if p := Principal(a.state); p != ids[0] {
				t.Fatalf("Principal = %q, want %q", p, ids[0])
			}
		})
	}
}

// The client CA reloads too: after it changes, certificates of the old CA
// are refused and those of the new one accepted.
func TestClientCARotation(t *testing.T) {
	oldCA, newCA := testcerts.NewCA(t, "old"), testcerts.NewCA(t, "new")
	dir := testcerts.NewSecretDir(t, testcerts.Files(oldCA.Server(t), oldCA))
	l := listenerOn(dir)
	l.ClientCAFile = dir.Path("ca.crt")
	_, log := newLog()
	s := newStore(t, Config{Listener: l}, nil, log)
	addr, got := serve(t, s.ServerConfig(), 10*time.Second)
	client := func(ca *testcerts.Cert) *tls.Config {
		pair := ca.Client(t, "app").TLS(t)
		return &tls.Config{RootCAs: oldCA.Pool(), ServerName: "localhost",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}
	}
	// With a session cache, the second dial offers to resume the first
	// session: that must not let the old certificate in either.
	oldClient := client(oldCA)
	oldClient.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	for i := 0; i < 2; i++ {
		c, err := dial(t, addr, oldClient)
		if err != nil {
			t.Fatalf("old CA before rotation: %v", err)
		}
		if i == 1 && !c.ConnectionState().DidResume {
			t.Fatal("the second connection did not resume: the test would not cover resumption")
		}
		next(t, got)
	}
	files := testcerts.Files(oldCA.Server(t), nil)
	files["ca.crt"] = newCA.CertPEM
	dir.Update(t, files)
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if _, err := dial(t, addr, oldClient); err == nil {
		t.Fatal("a certificate of the old client CA was accepted after rotation")
	}
	if a := next(t, got); ClassifyHandshakeError(a.err) != ResultUnknownCA {
		t.Fatalf("server: %v, want %s", a.err, ResultUnknownCA)
	}
	if _, err := dial(t, addr, client(newCA)); err != nil {
		t.Fatalf("new CA after rotation: %v", err)
	}
}

// min_version 1.3 refuses a TLS 1.2 client, counted as version.
func TestMinVersion(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	dir := testcerts.NewSecretDir(t, testcerts.Files(ca.Server(t), nil))
	l := listenerOn(dir)
	l.MinVersion = "1.3"
	_, log := newLog()
	s := newStore(t, Config{Listener: l}, nil, log)
	addr, got := serve(t, s.ServerConfig(), 10*time.Second)
	_, err := dial(t, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MaxVersion: tls.VersionTLS12})
	if err == nil {
		t.Fatal("a TLS 1.2 client was accepted with min_version 1.3")
	}
	if a := next(t, got); ClassifyHandshakeError(a.err) != ResultVersion || ClassifyHandshakeError(err) != ResultVersion {
		t.Fatalf("server %v, client %v: want both %s", a.err, err, ResultVersion)
	}
}

// A file that disappears is reported once, naming its field, and the old
// material stays; when a good pair comes back it is loaded.
func TestMissingFileThenBack(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	dir := t.TempDir()
	crt, key := ca.Server(t).Write(t, dir, "tls.crt", "tls.key")
	m, _ := newMetrics()
	logs, log := newLog()
	s := newStore(t, Config{Listener: &Listener{CertFile: crt, KeyFile: key}}, m, log)
	old := s.Serial()
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("Reload = %v, want the missing key file named", err)
	}
	if err := s.Reload(); err != nil {
		t.Fatalf("second Reload = %v, want the missing file reported once", err)
	}
	if lines := logs.lines(); len(lines) != 1 || !strings.Contains(lines[0], `"field":"tls.listener.key_file"`) {
		t.Fatalf("log %q, want one line naming tls.listener.key_file", lines)
	}
	if s.Serial() != old {
		t.Fatalf("serial %s, want the old %s kept", s.Serial(), old)
	}
	next := ca.Server(t)
	next.Write(t, dir, "tls.crt", "tls.key")
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload after the files came back: %v", err)
	}
	if s.Serial() != next.Serial().Text(16) {
		t.Fatalf("serial %s, want the new %s", s.Serial(), next.Serial().Text(16))
	}
	if e, ok := testutil.ToFloat64(m.reloads.WithLabelValues(SideClient, "error")), testutil.ToFloat64(m.reloads.WithLabelValues(SideClient, "ok")); e != 1 || ok != 1 {
		t.Fatalf("reloads error %v ok %v, want 1 and 1", e, ok)
	}
}

// Files rewritten in place right after being read keep their inode, and
// may keep their size and their time stamp (kept at a coarse clock tick):
// a recent modification is read again rather than trusted. The test makes
// the stat identical on purpose (same size, time set back).
func TestInPlaceRewriteSeen(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	dir := t.TempDir()
	// Every file padded to 4 KiB (PEM ignores text around its blocks),
	// so the rewrite can keep the size.
	pad := func(data []byte) []byte {
		return append(append([]byte{}, data...), strings.Repeat("\n", 4096-len(data))...)
	}
	first := ca.Server(t)
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	testcerts.WriteFile(t, crt, pad(first.CertPEM))
	testcerts.WriteFile(t, key, pad(first.KeyPEM))
	_, log := newLog()
	s := newStore(t, Config{Listener: &Listener{CertFile: crt, KeyFile: key}}, nil, log)
	stats := func() (os.FileInfo, os.FileInfo) {
		c, err1 := os.Stat(crt)
		k, err2 := os.Stat(key)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		return c, k
	}
	c0, k0 := stats()
	next := ca.Server(t)
	testcerts.WriteFile(t, crt, pad(next.CertPEM))
	testcerts.WriteFile(t, key, pad(next.KeyPEM))
	if err := os.Chtimes(crt, c0.ModTime(), c0.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(key, k0.ModTime(), k0.ModTime()); err != nil {
		t.Fatal(err)
	}
	if c1, k1 := stats(); !os.SameFile(c0, c1) || c1.Size() != c0.Size() || !c1.ModTime().Equal(c0.ModTime()) || k1.Size() != k0.Size() {
		t.Fatal("the test did not manage to keep the stat")
	}
	if err := s.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if s.Serial() != next.Serial().Text(16) {
		t.Fatalf("serial %s, want %s: an in-place rewrite with the same stat went unseen", s.Serial(), next.Serial().Text(16))
	}
}
