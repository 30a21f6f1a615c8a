package admin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// blockingGatherer holds its first Gather until release is closed, so a
// scrape can be held between its readiness check and its answer.
type blockingGatherer struct {
	prometheus.Gatherer
	calls            atomic.Int32
	entered, release chan struct{}
}

func (b *blockingGatherer) Gather() ([]*dto.MetricFamily, error) {
	if b.calls.Add(1) == 1 {
		close(b.entered)
		<-b.release
	}
	return b.Gatherer.Gather()
}

// TestReadyMetricConcurrentScrapes checks each scrape reports its own
// readiness check: a scrape whose check passed answers kproxy_ready 1 even
// when another scrape's check failed meanwhile (two Prometheus replicas
// scrape the same pod).
func TestReadyMetricConcurrentScrapes(t *testing.T) {
	var checks atomic.Int32
	ready := func(context.Context) error {
		if checks.Add(1) == 1 {
			return nil // the first scrape's check passes
		}
		return errors.New("upstream unreachable") // the second's fails
	}
	g := &blockingGatherer{Gatherer: prometheus.NewRegistry(), entered: make(chan struct{}), release: make(chan struct{})}
	h := newReadyGauge().metricsHandler(g, ready)

	first := make(chan string)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		first <- rec.Body.String()
	}()
	<-g.entered // the first scrape has checked and is gathering
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "kproxy_ready 0\n") {
		t.Errorf("second scrape (check failed): want kproxy_ready 0:\n%s", rec.Body.String())
	}
	close(g.release)
	if body := <-first; !strings.Contains(body, "kproxy_ready 1\n") {
		t.Errorf("first scrape (check passed): want kproxy_ready 1, got the other scrape's value:\n%s", body)
	}
}
