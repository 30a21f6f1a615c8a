package k8s_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The API-server tests listen on these loopback ports, apart from the
// ranges other suites and the kernel's ephemeral ports use.
const (
	etcdClientPort = 29510
	etcdPeerPort   = 29511
	apiServerPort  = 29512
)

// apiServer is a kube-apiserver backed by its own etcd, both started on
// 127.0.0.1 by the test that needs them and stopped when it ends.
type apiServer struct {
	URL    string       // https://127.0.0.1:port
	Token  string       // bearer token of a system:masters user
	Client *http.Client // trusts the server's generated certificate
}

// apiServerBinaries finds kube-apiserver and etcd where
// tools/install-apiserver.sh puts them, and fails the test, saying how to
// get them, when they are missing.
func apiServerBinaries(t *testing.T) (apiserver, etcd string) {
	t.Helper()
	dir := os.Getenv("KPROXY_APISERVER_DIR")
	built := dir == "" // the script's cache, not binaries of the user's own
	if dir == "" {
		cache := os.Getenv("KPROXY_E2E_CACHE")
		if cache == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				t.Fatalf("no cache directory to look for kube-apiserver in: %v", err)
			}
			cache = filepath.Join(base, "kproxy-e2e")
		}
		dir = filepath.Join(cache, "apiserver")
	}
	apiserver, etcd = filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "etcd")
	for _, bin := range []string{apiserver, etcd} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s is missing: run `bash examples/k8s/tools/install-apiserver.sh` from the repository root "+
				"(it builds kube-apiserver and etcd into the cache), or set KPROXY_APISERVER_DIR to a directory holding both", bin)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "stamp")); built && err != nil {
		t.Fatalf("%s has no stamp: its last build did not finish; run `bash examples/k8s/tools/install-apiserver.sh` again", dir)
	}
	return apiserver, etcd
}

// startAPIServer starts etcd and kube-apiserver and waits until the API
// server's /readyz answers ok. Anyone with its token is allowed anything.
func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	apiserverBin, etcdBin := apiServerBinaries(t)
	dir := t.TempDir()

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort)
	_, etcdExited := startProcess(t, "etcd", etcdBin,
		"--name", "kproxy-test",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL,
		"--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort),
		"--initial-cluster", fmt.Sprintf("kproxy-test=http://127.0.0.1:%d", etcdPeerPort),
	)

	caPEM, certPEM, keyPEM := servingCert(t, "kube-apiserver")
	saKey := serviceAccountKey(t)
	const token = "kproxy-test-token"
	files := map[string][]byte{
		"tls.crt":    certPEM,
		"tls.key":    keyPEM,
		"sa.key":     saKey,
		"tokens.csv": []byte(token + ",kproxy-test,kproxy-test,system:masters\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, apiExited := startProcess(t, "kube-apiserver", apiserverBin,
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		// No kubernetes Service endpoints: they may not be loopback.
		"--endpoint-reconciler-type", "none",
		"--secure-port", fmt.Sprint(apiServerPort),
		"--tls-cert-file", filepath.Join(dir, "tls.crt"),
		"--tls-private-key-file", filepath.Join(dir, "tls.key"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "AlwaysAllow",
		"--anonymous-auth=false",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--cert-dir", filepath.Join(dir, "certs"),
	)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	s := &apiServer{
		URL:    fmt.Sprintf("https://127.0.0.1:%d", apiServerPort),
		Token:  token,
		Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second},
	}
	s.waitReady(t, map[string]<-chan struct{}{"etcd": etcdExited, "kube-apiserver": apiExited})
	return s
}

// waitReady polls /readyz until it answers ok; a server that never does,
// or a process that exits meanwhile, fails the test.
func (s *apiServer) waitReady(t *testing.T, exited map[string]<-chan struct{}) {
	t.Helper()
	var last string
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		code, body, err := s.do("GET", "/readyz", "", nil)
		if err == nil && code == http.StatusOK {
			return
		}
		last = fmt.Sprintf("%d %s %v", code, body, err)
		for name, ch := range exited {
			select {
			case <-ch:
				t.Fatalf("%s exited before kube-apiserver was ready (its output follows)", name)
			default:
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("kube-apiserver never became ready: %s", last)
}

// do sends one request with the token and returns the status and body.
func (s *apiServer) do(method, path, contentType string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// startProcess runs a server process for the rest of the test, its output
// in the test log when the test fails, and stops it at the end, or
// earlier when the test calls the function it returns.
func startProcess(t *testing.T, name, bin string, args ...string) (stop func(), exited <-chan struct{}) {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("%s output:\n%s", name, tail(log, 8000))
		}
		out.Close()
	})
	return stop, done
}

// tail keeps the last n bytes of a log.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// servingCert makes a CA and a certificate it signs for 127.0.0.1 and
// localhost, all PEM.
func servingCert(t *testing.T, cn string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn + " test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// serviceAccountKey makes the RSA key the API server signs service-account
// tokens with, PEM.
func serviceAccountKey(t *testing.T) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// TestAPIServerStarts checks the harness itself: the server answers with
// its version and refuses a request without the token.
func TestAPIServerStarts(t *testing.T) {
	s := startAPIServer(t)
	code, body, err := s.do("GET", "/version", "", nil)
	if err != nil || code != http.StatusOK || !bytes.Contains(body, []byte(`"gitVersion": "v1.37.`)) {
		t.Fatalf("GET /version: %d %s %v", code, body, err)
	}
	req, _ := http.NewRequest("GET", s.URL+"/api/v1/namespaces", nil)
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET /api/v1/namespaces without a token: %d, want 401 or 403", resp.StatusCode)
	}
}
