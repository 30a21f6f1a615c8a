package proxy

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kproxy/kproxy/proxy/stream"
	"github.com/kproxy/kproxy/tlsconf"
)

// stormClients is how many handshakes the storm runs at once: one client
// process looping 8 in parallel, as issue 27 item 6 measured. It is a
// process of its own (this test binary, run again), as an attacker is:
// its goroutines must not queue ahead of kproxy's in one Go scheduler.
const stormClients = 8

// stormPace is the wait between the live connection's requests.
const stormPace = 2 * time.Millisecond

// stormEnv, set to "ADDR,CAFILE", makes the test binary the storm's
// client process instead of running tests.
const stormEnv = "KPROXY_HANDSHAKE_STORM"

// BenchmarkHandshakeStorm is the latency of Metadata on an open TLS
// connection while another client loops full handshakes against the same
// listener, per certificate key type: "quiet" (no storm), "storm" (the
// handshake CPU slots, one less than GOMAXPROCS), and "storm-unbounded"
// (every handshake computes at once, as before issue 27). It reports the
// live connection's p50 and p99 and the storm's handshakes per second;
// compare the ratios within one run (docs/benchmarks/round-3.md).
//
//	go test -run XXX -bench HandshakeStorm -benchtime 400x ./proxy/
func BenchmarkHandshakeStorm(b *testing.B) {
	for _, k := range []struct {
		name string
		key  func() (crypto.Signer, error)
	}{
		{"ecdsa-p256", func() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }},
		{"rsa-2048", func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, 2048) }},
		{"rsa-4096", func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, 4096) }},
	} {
		key, err := k.key()
		if err != nil {
			b.Fatal(err)
		}
		cert, pool := stormCert(b, key)
		for _, d := range []struct {
			name  string
			storm bool
			slots int // 0: kproxy's default
		}{{"quiet", false, 0}, {"storm", true, 0}, {"storm-unbounded", true, 1 << 10}} {
			b.Run(k.name+"/"+d.name, func(b *testing.B) {
				defer stream.SetHandshakeCPUSlots(d.slots)()
				runStorm(b, cert, pool, d.storm)
			})
		}
	}
}

func runStorm(b *testing.B, cert [2]string, pool *x509.CertPool, storm bool) {
	w := startTLSKfake(b, tlsSides{client: true}, []kfake.Opt{kfake.SeedTopics(1, "t")}, func(c *tlsconf.Config) {
		c.Listener.CertFile, c.Listener.KeyFile = cert[0], cert[1]
	})
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	live, err := tls.Dial("tcp", w.addr, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer live.Close()
	md := metadataV9("t")
	ask := func(corr int32) {
		live.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := live.Write(encodeRequest(md, corr)); err != nil {
			b.Fatal(err)
		}
		if f, err := readFrame(live); err != nil || corrOf(f) != corr {
			b.Fatalf("Metadata #%d: %v", corr, err)
		}
	}
	ask(0)
	var child *stormProc
	if storm {
		child = startStorm(b, w.addr, cert[0])
		defer child.stop()
		child.waitGoing(b)
	}
	lat := make([]time.Duration, 0, b.N)
	var corr int32
	before, start := child.count(), time.Now()
	for b.Loop() {
		corr++
		t0 := time.Now()
		ask(corr)
		lat = append(lat, time.Since(t0))
		// Paced as an application's requests are, so the run spans
		// seconds of the storm whatever the latency.
		b.StopTimer()
		time.Sleep(stormPace)
		b.StartTimer()
	}
	elapsed := time.Since(start)
	handshakes := child.count() - before
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(handshakes)/elapsed.Seconds(), "handshakes/s")
}

// stormCert writes a self-signed certificate for 127.0.0.1 with key and
// returns its files (cert, key) and a pool that trusts it.
func stormCert(b *testing.B, key crypto.Signer) ([2]string, *x509.CertPool) {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kproxy"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		b.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	files := [2]string{filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")}
	for i, blk := range []*pem.Block{{Type: "CERTIFICATE", Bytes: der}, {Type: "PRIVATE KEY", Bytes: pk}} {
		if err := os.WriteFile(files[i], pem.EncodeToMemory(blk), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return files, pool
}

// stormProc is the storm's client process; it prints one line per
// handshake done.
type stormProc struct {
	cmd  *exec.Cmd
	done atomic.Int64
}

// startStorm runs the storm against addr, trusting the certificate in
// caFile, until stop.
func startStorm(b *testing.B, addr, caFile string) *stormProc {
	p := &stormProc{cmd: exec.Command(os.Args[0])}
	p.cmd.Env = append(os.Environ(), stormEnv+"="+addr+","+caFile)
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.done.Add(1)
		}
	}()
	return p
}

// waitGoing waits until the storm has done its first handshakes.
func (p *stormProc) waitGoing(b *testing.B) {
	deadline := time.Now().Add(30 * time.Second)
	for p.done.Load() < stormClients {
		if time.Now().After(deadline) {
			b.Fatal("the storm made no handshake in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
}

// count is how many handshakes the storm has done.
func (p *stormProc) count() int64 {
	if p == nil {
		return 0
	}
	return p.done.Load()
}

func (p *stormProc) stop() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// stormChild is the storm's process: stormClients loops of full
// handshakes against spec's address, each connection closed once made,
// for at most a minute (it is killed sooner).
func stormChild(spec string) {
	addr, caFile, _ := strings.Cut(spec, ",")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(2)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	var mu sync.Mutex
	for range stormClients {
		go func() {
			for {
				c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
				if err != nil {
					continue
				}
				c.Close()
				mu.Lock()
				fmt.Println("1")
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Minute)
	os.Exit(0)
}
