package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TestEndpoints checks what an orchestrator and a scraper see: liveness,
// readiness that follows the ReadyFunc with its reason, and the metrics of
// the registry the server was given.
func TestEndpoints(t *testing.T) {
	var notReady atomic.Pointer[error]
	ready := func(context.Context) error {
		if p := notReady.Load(); p != nil {
			return *p
		}
		return nil
	}
	base := startServer(t, Config{Listen: "127.0.0.1:0"}, ready)

	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz while ready = %d %q", code, body)
	}
	reason := errors.New("upstream 10.0.0.1:9092 unreachable")
	notReady.Store(&reason)
	code, body := get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, reason.Error()) {
		t.Errorf("/readyz while not ready = %d %q, want 503 naming %q", code, body, reason)
	}
	notReady.Store(nil)
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after recovery = %d", code)
	}

	code, body = get(t, base+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "kproxy_test_events_total 3") {
		t.Errorf("/metrics = %d, lacks the test counter:\n%s", code, body)
	}
}

// TestPprof checks profiling stays off unless asked for, since it exposes
// internals and costs CPU.
func TestPprof(t *testing.T) {
	ok := func(context.Context) error { return nil }
	off := startServer(t, Config{Listen: "127.0.0.1:0"}, ok)
	if code, _ := get(t, off+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("pprof off: /debug/pprof/ = %d, want 404", code)
	}
	on := startServer(t, Config{Listen: "127.0.0.1:0", Pprof: true}, ok)
	if code, body := get(t, on+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("pprof on: /debug/pprof/ = %d %.80q", code, body)
	}
}

// TestStartBusyPort checks Start reports a port in use instead of failing
// later in the background.
func TestStartBusyPort(t *testing.T) {
	ok := func(context.Context) error { return nil }
	first := startServer(t, Config{Listen: "127.0.0.1:0"}, ok)
	s := New(Config{Listen: strings.TrimPrefix(first, "http://")}, prometheus.NewRegistry(), ok, zerolog.Nop())
	if err := s.Start(); err == nil {
		s.Close(context.Background())
		t.Fatal("Start on a busy port succeeded")
	}
}

// TestValidate checks an empty listen (admin off) is allowed and a
// malformed one is not.
func TestValidate(t *testing.T) {
	for _, l := range []string{"", "127.0.0.1:9190", ":9190", "[::1]:0"} {
		if err := (Config{Listen: l}).Validate(); err != nil {
			t.Errorf("Validate(%q) = %v", l, err)
		}
	}
	for _, l := range []string{"9190", "localhost", "a:b:c"} {
		if err := (Config{Listen: l}).Validate(); err == nil {
			t.Errorf("Validate(%q) succeeded", l)
		}
	}
}

// startServer starts a Server whose registry holds one counter at 3 and
// returns its base URL; it is closed when the test ends.
func startServer(t *testing.T, c Config, ready ReadyFunc) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	ctr := prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_test_events_total", Help: "Test counter."})
	reg.MustRegister(ctr)
	ctr.Add(3)
	s := New(c, reg, ready, zerolog.Nop())
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return "http://" + s.Addr().String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}
