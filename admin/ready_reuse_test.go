package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestReadyMetricReusesRecentProbe checks a scrape reports the kubelet's
// last /readyz answer while it is under probeReuse old, without a check
// of its own (no extra broker connection or login), and checks again once
// the answer is older.
func TestReadyMetricReusesRecentProbe(t *testing.T) {
	var checks atomic.Int32
	var down atomic.Bool
	ready := func(context.Context) error {
		checks.Add(1)
		if down.Load() {
			return errors.New("upstream unreachable")
		}
		return nil
	}
	now := time.Unix(1_000_000, 0)
	rg := newReadyGauge()
	rg.now = func() time.Time { return now }
	metrics := rg.metricsHandler(prometheus.NewRegistry(), ready)
	readyz := rg.readyzHandler(ready)
	serve := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	scrape := func(want string, wantChecks int32) {
		t.Helper()
		if _, body := serve(metrics, "/metrics"); !strings.Contains(body, want) {
			t.Errorf("want %q:\n%s", want, body)
		}
		if n := checks.Load(); n != wantChecks {
			t.Errorf("%d readiness checks so far, want %d", n, wantChecks)
		}
	}

	scrape("kproxy_ready 1\n", 1) // no probe yet: the scrape checks
	if code, _ := serve(readyz, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz = %d, want 200", code)
	}
	down.Store(true)
	now = now.Add(probeReuse - time.Second)
	scrape("kproxy_ready 1\n", 2) // the probe's answer, no new check
	if code, _ := serve(readyz, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d, want 503", code)
	}
	scrape("kproxy_ready 0\n", 3) // the probe's new answer
	down.Store(false)
	now = now.Add(probeReuse)
	scrape("kproxy_ready 1\n", 4) // too old: the scrape checks again
}
