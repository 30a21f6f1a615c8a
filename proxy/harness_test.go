package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/embedded"
	"github.com/kproxy/kproxy/proxy/loop"
	"github.com/kproxy/kproxy/tracing"
)

// testEnv is one kproxy in front of one upstream, for a test.
type testEnv struct {
	srv     *Server
	addr    string // kproxy's client address
	m       *Metrics
	reg     *prometheus.Registry
	cluster *kfake.Cluster // nil when the upstream is not kfake
	logs    *logBuffer
}

type envOpt func(*Config, *framing.Config, *correlate.Config)

// startProxy runs kproxy in front of upstream (a HOST:PORT) and stops it at
// the end of the test.
func startProxy(t testing.TB, upstream string, opts ...envOpt) *testEnv {
	t.Helper()
	return startTracedProxy(t, upstream, nil, opts...)
}

// startTracedProxy is startProxy with a tracer.
func startTracedProxy(t testing.TB, upstream string, tr *tracing.Tracer, opts ...envOpt) *testEnv {
	t.Helper()
	return startProxyWith(t, upstream, tr, nil, opts...)
}

// startProxyWith is startTracedProxy with setup run on the server before
// it listens (SetTLS).
func startProxyWith(t testing.TB, upstream string, tr *tracing.Tracer, setup func(*Server), opts ...envOpt) *testEnv {
	t.Helper()
	env, err := listenProxy(t, upstream, tr, setup, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// listenProxy is startProxyWith returning Listen's error, for a caller
// that may try other ports.
func listenProxy(t testing.TB, upstream string, tr *tracing.Tracer, setup func(*Server), opts ...envOpt) (*testEnv, error) {
	t.Helper()
	cfg, fc, cc := Defaults(), framing.Defaults(), correlate.Defaults()
	cfg.Listen, cfg.Upstream = "127.0.0.1:0", upstream
	cfg.DrainTimeout = 2 * time.Second
	for _, o := range opts {
		o(&cfg, &fc, &cc)
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	logs := &logBuffer{}
	var w io.Writer = logs
	if testing.Verbose() && os.Getenv("KPROXY_TEST_LOGS") != "" {
		w = io.MultiWriter(logs, os.Stderr)
	}
	srv, err := New(cfg, fc, cc, zerolog.New(w).Level(zerolog.DebugLevel), m, tr)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(srv)
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	go srv.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		srv.Drain(ctx)
		if t.Failed() { // a flake on a loaded machine is found from this
			t.Logf("kproxy's log:\n%s", logs)
		}
	})
	return &testEnv{srv: srv, addr: srv.Addr().String(), m: m, reg: reg, logs: logs}, nil
}

// startKfake runs an in-process kfake broker advertising kproxy's address
// and kproxy in front of it, so every client connection goes through kproxy.
func startKfake(t testing.TB, kopts []kfake.Opt, opts ...envOpt) *testEnv {
	t.Helper()
	return startTracedKfake(t, kopts, nil, opts...)
}

// startTracedKfake is startKfake with a tracer.
func startTracedKfake(t testing.TB, kopts []kfake.Opt, tr *tracing.Tracer, opts ...envOpt) *testEnv {
	t.Helper()
	b, err := embedded.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	env := startTracedProxy(t, b.Addr(), tr, opts...)
	c, err := b.Start(env.addr, kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env.cluster = c
	return env
}

// startKfakeWith is startKfake with setup run on the server before it
// listens, and started run on kfake before any client connects.
func startKfakeWith(t testing.TB, kopts []kfake.Opt, setup func(*Server), started func(*kfake.Cluster), opts ...envOpt) *testEnv {
	t.Helper()
	b, err := embedded.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	env := startProxyWith(t, b.Addr(), nil, setup, opts...)
	c, err := b.Start(env.addr, kopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env.cluster = c
	if started != nil {
		started(c)
	}
	return env
}

// requests is the number of requests kproxy read for an API name.
func (e *testEnv) requests(api string) float64 {
	return testutil.ToFloat64(e.m.Relay.Requests.WithLabelValues(api))
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dialRaw opens a plain TCP connection to kproxy.
func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// pairs are the netpoll pairs env's server holds now.
func (e *testEnv) pairs() []loop.Pair { return serverPairs(e.srv) }

// serverPairs are the netpoll pairs srv holds now.
func serverPairs(srv *Server) []loop.Pair {
	var out []loop.Pair
	for _, c := range srv.core.Conns() {
		if p, ok := loop.PairOf(c); ok {
			out = append(out, p)
		}
	}
	return out
}

// isTimeout reports whether err is a deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// refused is kproxy_connections_refused_total{reason}.
func (e *testEnv) refused(reason string) float64 {
	return testutil.ToFloat64(e.m.Refused.WithLabelValues(reason))
}

// eventually reports whether cond became true within d, for a test that
// says more than waitFor when it does not.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// waitGoroutinesBack waits for kproxy to be back to at most slack
// goroutines more than before (kproxyGoroutines), once every client and
// connection of a test is gone: kproxy kept none of them. The test's own
// peers (toxiproxy's links, a client library's producers) are not
// counted: on a loaded machine they may take longer to wind down than
// kproxy does, and they are not what is checked. On failure kproxy's
// goroutines still there are printed.
func waitGoroutinesBack(t testing.TB, before, slack int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, stacks := kproxyGoroutines()
		if n <= before+slack {
			return
		}
		if time.Now().After(deadline) {
			dump := strings.Join(stacks, "\n\n")
			if len(dump) > 20000 {
				dump = dump[:20000] + "\n..."
			}
			t.Fatalf("%d kproxy goroutines 60s after the test's clients left, %d before: kproxy kept some\n%s", n, before, dump)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// repoRoot is the repository's directory, as stack traces name its files.
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}()

// kproxyGoroutines counts the goroutines running kproxy's own code: a
// frame in one of the repository's non-test files. It returns their
// stacks too.
func kproxyGoroutines() (int, []string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var ours []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, line := range strings.Split(g, "\n") {
			f := strings.TrimSpace(line)
			if strings.HasPrefix(f, repoRoot+"/") && !strings.Contains(f, "_test.go:") {
				ours = append(ours, g)
				break
			}
		}
	}
	return len(ours), ours
}
