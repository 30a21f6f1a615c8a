// Package otlptest serves an OTLP/HTTP metrics endpoint for tests: what
// kproxy exports is decoded as a collector decodes it and kept.
package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"
)

// MetricsSink keeps every export request it is sent at /v1/metrics.
type MetricsSink struct {
	URL string // the endpoint, ".../v1/metrics"

	mu    sync.Mutex
	got   []*colmetricspb.ExportMetricsServiceRequest
	block chan struct{}
}

// NewMetricsSink serves a sink until the test ends. With block set,
// requests wait until it is closed (a collector that does not answer).
func NewMetricsSink(t testing.TB, block chan struct{}) *MetricsSink {
	s := &MetricsSink{block: block}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/v1/metrics"
	return s
}

func (s *MetricsSink) serve(w http.ResponseWriter, r *http.Request) {
	if s.block != nil {
		<-s.block
	}
	if r.URL.Path != "/v1/metrics" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want a protobuf POST to /v1/metrics", http.StatusBadRequest)
		return
	}
	b, _ := io.ReadAll(r.Body)
	req := new(colmetricspb.ExportMetricsServiceRequest)
	if err := proto.Unmarshal(b, req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, req)
	s.mu.Unlock()
	out, _ := proto.Marshal(&colmetricspb.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// Requests are the export requests received so far.
func (s *MetricsSink) Requests() []*colmetricspb.ExportMetricsServiceRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*colmetricspb.ExportMetricsServiceRequest(nil), s.got...)
}

// Names are the metric names received under resources whose attribute
// key has the value v.
func (s *MetricsSink) Names(key, v string) []string {
	var out []string
	for _, req := range s.Requests() {
		for _, rm := range req.ResourceMetrics {
			match := false
			for _, kv := range rm.Resource.GetAttributes() {
				match = match || (kv.Key == key && kv.Value.GetStringValue() == v)
			}
			if !match {
				continue
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					out = append(out, m.Name)
				}
			}
		}
	}
	return out
}
