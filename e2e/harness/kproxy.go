package harness

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// KproxyEnv names a prebuilt kproxy binary to test instead of building
// one from the repository.
const KproxyEnv = "KPROXY_E2E_KPROXY"

var kproxyBuild goBinary

// KproxyBinary builds kproxy from the repository (once per test binary)
// and returns its path, or returns $KPROXY_E2E_KPROXY when set.
func KproxyBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(KproxyEnv); p != "" {
		return p
	}
	return kproxyBuild.get(t, "kproxy", RepoRoot(t), "./cmd/kproxy")
}

// Kproxy is a running kproxy.
type Kproxy struct {
	*Proc
	Addr      string // Kafka clients connect here
	AdminAddr string // /healthz /readyz /metrics

	name, upstream string   // for Restart
	extra, env     []string // for Restart
}

// StartKproxyDemo runs `kproxy demo` on free loopback ports: kproxy in
// front of its embedded broker, which advertises kproxy's address. env
// adds to the environment (OTEL_* is not inherited from the test's). It
// returns once /readyz answers 200.
func StartKproxyDemo(t testing.TB, env ...string) *Kproxy {
	t.Helper()
	bin := KproxyBinary(t)
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		ports := FreePorts(t, 2)
		k := &Kproxy{
			Addr:      fmt.Sprintf("127.0.0.1:%d", ports[0]),
			AdminAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		}
		args := []string{"demo", "--listen", k.Addr, "--admin", k.AdminAddr}
		k.Proc = Start(t, "kproxy", bin, args, Env(env...), "")
		err := waitHTTP(k.Proc, "http://"+k.AdminAddr+"/readyz", 20*time.Second)
		if err == nil {
			return k
		}
		lastErr = err
		if !errors.Is(err, errExited) || !strings.Contains(k.Output(), "address already in use") {
			break
		}
		t.Logf("kproxy lost a port race (attempt %d); retrying with new ports", attempt)
	}
	t.Fatalf("kproxy did not become ready: %v", lastErr)
	return nil
}

// Shutdown stops kproxy with SIGTERM (it drains, then flushes its spans)
// and fails the test unless it exits 0 within timeout and reports that its
// spans were flushed.
func (k *Kproxy) Shutdown(t testing.TB, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	if err := k.Stop(syscall.SIGTERM, timeout); err != nil {
		t.Fatalf("kproxy after SIGTERM: %v\n%s", err, k.Tail(30))
	}
	if out := k.Output(); strings.Contains(out, "spans not flushed") {
		t.Fatalf("kproxy could not flush its spans on shutdown:\n%s", k.Tail(30))
	}
	t.Logf("kproxy stopped cleanly %v after SIGTERM", time.Since(start).Round(time.Millisecond))
}

// StartKproxy runs `kproxy run` listening on listen, in front of upstream,
// with its admin server on a free port, and returns once /readyz answers
// 200 (which needs upstream to be dialable). extra adds flags.
func StartKproxy(t testing.TB, name, listen, upstream string, extra ...string) *Kproxy {
	t.Helper()
	admin := fmt.Sprintf("127.0.0.1:%d", FreePorts(t, 1)[0])
	return startKproxyAt(t, name, listen, admin, upstream, extra, nil)
}

// StartKproxyEnv is StartKproxy with env ("K=V") added to kproxy's
// environment, such as the pod names the downward API passes.
func StartKproxyEnv(t testing.TB, name, listen, upstream string, env []string, extra ...string) *Kproxy {
	t.Helper()
	admin := fmt.Sprintf("127.0.0.1:%d", FreePorts(t, 1)[0])
	return startKproxyAt(t, name, listen, admin, upstream, extra, env)
}

func startKproxyAt(t testing.TB, name, listen, admin, upstream string, extra, env []string) *Kproxy {
	t.Helper()
	k := &Kproxy{Addr: listen, AdminAddr: admin, upstream: upstream, name: name, extra: extra, env: env}
	args := append([]string{"run", "--listen", listen, "--upstream", upstream, "--admin", admin}, extra...)
	k.Proc = Start(t, name, KproxyBinary(t), args, Env(env...), "")
	if err := waitHTTP(k.Proc, "http://"+admin+"/readyz", 20*time.Second); err != nil {
		t.Fatalf("%s did not become ready: %v\n%s", name, err, k.Tail(20))
	}
	return k
}

// Restart stops kproxy with SIGTERM (it drains) and starts it again on the
// same addresses, returning the new process.
func (k *Kproxy) Restart(t testing.TB, drain time.Duration) *Kproxy {
	t.Helper()
	if err := k.Stop(syscall.SIGTERM, drain); err != nil {
		t.Fatalf("%s after SIGTERM: %v\n%s", k.name, err, k.Tail(20))
	}
	return startKproxyAt(t, k.name, k.Addr, k.AdminAddr, k.upstream, k.extra, k.env)
}

// Metric is the value of a Prometheus sample line of kproxy's /metrics
// whose name and labels are exactly series (e.g. `kproxy_connections_open`
// or `kproxy_requests_total{api="Produce"}`); 0 when absent.
func (k *Kproxy) Metric(t testing.TB, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + k.AdminAddr + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", k.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v
	}
	return 0
}
