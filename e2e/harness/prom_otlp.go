package harness

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/util/teststorage"
)

// PromOTLP is Prometheus' own OTLP receiver (the handler behind
// --web.enable-otlp-receiver) writing into a Prometheus TSDB, with
// PromQL over it: what kproxy exports for client metrics is checked as a
// user would query it. client_id and k8s.pod.name are promoted to labels
// (otlp.promote_resource_attributes), as a user would configure it.
type PromOTLP struct {
	URL    string // the OTLP/HTTP metrics endpoint
	db     *teststorage.TestStorage
	engine *promql.Engine
}

// PromotedResourceAttributes are the resource attributes PromOTLP makes
// labels of (client_id, k8s_pod_name).
var PromotedResourceAttributes = []string{"client_id", "k8s.pod.name"}

// StartPromOTLP serves the receiver on a loopback port until the test ends.
func StartPromOTLP(t testing.TB) *PromOTLP {
	t.Helper()
	db := teststorage.New(t)
	cfg := config.DefaultConfig
	cfg.OTLPConfig = config.DefaultOTLPConfig
	cfg.OTLPConfig.PromoteResourceAttributes = PromotedResourceAttributes
	h := remote.NewOTLPWriteHandler(slog.New(slog.DiscardHandler), prometheus.NewRegistry(), db,
		func() config.Config { return cfg }, remote.OTLPOptions{LookbackDelta: 5 * time.Minute})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/otlp/v1/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: 30 * time.Second, LookbackDelta: 5 * time.Minute})
	return &PromOTLP{URL: "http://" + ln.Addr().String() + "/api/v1/otlp/v1/metrics", db: db, engine: engine}
}

// Query runs an instant PromQL query now, its selectors seeing only
// samples taken since since (the query's lookback delta).
func (p *PromOTLP) Query(ctx context.Context, q string, since time.Time) (promql.Vector, error) {
	now := time.Now()
	opts := promql.NewPrometheusQueryOpts(false, max(now.Sub(since), time.Millisecond), nil)
	qry, err := p.engine.NewInstantQuery(ctx, p.db, opts, q, now)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	return res.Vector()
}
