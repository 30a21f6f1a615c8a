package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// The client-metrics column (KIP-714). A cluster-mode kproxy with
// telemetry.clients on fronts the three-node cluster, whose brokers have
// no ClientTelemetry plugin, and exports what clients push over
// OTLP/HTTP to Prometheus' own OTLP receiver (harness.PromOTLP). Each
// cell produces its records paced over a few push intervals, so the
// client pushes while it runs and once more as it closes, then the cell
// queries Prometheus for the client's metrics (org.apache.kafka.*, as
// KIP-714 names them) sampled since the cell began, with the client_id
// label kproxy added from the request header. Cells of one broker run
// one after another, so what is sampled after a cell began is that
// cell's client's.

const (
	clientMetricsService  = "kproxy-client-metrics"
	clientMetricsRecords  = 60
	clientMetricsPace     = 50 * time.Millisecond // 60 records over 3 s: three push intervals
	clientMetricsInterval = time.Second
	clientMetricsWait     = 30 * time.Second
)

var clientMetricsPaths = []path{{name: "kproxy", proxied: true}}

// clientMetricsFixture is the column's kproxy and the Prometheus it
// exports to.
type clientMetricsFixture struct {
	kafka  *harness.KafkaCluster
	prom   *harness.PromOTLP
	kproxy *harness.ClusterKproxy
}

func startClientMetricsFixture(t *testing.T, k *harness.KafkaCluster) *clientMetricsFixture {
	t.Helper()
	prom := harness.StartPromOTLP(t)
	yaml := fmt.Sprintf("telemetry:\n  clients:\n    enabled: true\n    endpoint: %s\n    protocol: http/protobuf\n    push_interval: %s\n    metrics: [\"org.apache.kafka.\"]\n",
		prom.URL, clientMetricsInterval)
	return &clientMetricsFixture{kafka: k, prom: prom, kproxy: harness.StartClusterKproxyWith(t, clientMetricsService, k, yaml)}
}

func (f *clientMetricsFixture) kproxies() []*harness.Kproxy {
	if f == nil {
		return nil
	}
	return []*harness.Kproxy{f.kproxy.Kproxy}
}

// clientMetricsCell is the column's cell (see the column's comment).
func (c *cell) clientMetricsCell() error {
	f := c.env.clientMetrics
	start := time.Now()
	f.kafka.CreateTopic(c.t, c.topic, 1, 3)
	want := records(c.topic, clientMetricsRecords)
	ctx, cancel := c.ctx()
	defer cancel()
	conn := kclients.Conn{Bootstrap: f.kproxy.Addr}
	if err := c.driver.Produce(ctx, kclients.ProduceOpts{Conn: conn, Topic: c.topic, Acks: "all", Compression: "none", Pace: clientMetricsPace}, want); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	// Series sampled since the cell began (the query's lookback), by
	// client id and job (the service.name kproxy sets to the client id
	// when the client sets none). Samples carry the client's own
	// collection times: a client made after start samples after it, and
	// the previous cell's client closed before it.
	q := `count by (client_id, job) ({__name__=~"org[._]apache[._]kafka[._].+"})`
	deadline := time.Now().Add(clientMetricsWait)
	for {
		vec, err := f.prom.Query(ctx, q, start)
		if err == nil && len(vec) > 0 {
			return clientMetricsSeen(c, f, vec, start)
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("querying prometheus: %w", err)
			}
			return fmt.Errorf("after %v no org.apache.kafka.* series sampled since the cell began reached Prometheus (%s: pushes %v, dropped %v)",
				clientMetricsWait, clientMetricsService,
				f.kproxy.Metric(c.t, `kproxy_client_metrics_pushes_total{result="ok"}`),
				f.kproxy.Metric(c.t, `kproxy_client_metrics_dropped_total{reason="export_failed"}`))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// clientMetricsSeen checks the series of one client: a client id label,
// which is also its job.
func clientMetricsSeen(c *cell, f *clientMetricsFixture, vec promql.Vector, start time.Time) error {
	var seen []string
	for _, s := range vec {
		id, job := s.Metric.Get("client_id"), s.Metric.Get("job")
		if id == "" || job != id {
			return fmt.Errorf("series by client %q, job %q: want the client id as both labels", id, job)
		}
		seen = append(seen, fmt.Sprintf("%s: %v series", id, s.F))
	}
	if len(vec) != 1 {
		return fmt.Errorf("series of %d clients since the cell began at %.3f (%s; newest sample by client: %s): want this cell's one producer",
			len(vec), float64(start.UnixMilli())/1000, strings.Join(seen, ", "), newestSamples(c, f, start))
	}
	c.t.Logf("%s: client metrics in Prometheus by client_id: %s", c.path.name, strings.Join(seen, ", "))
	return nil
}

// newestSamples is each client's newest target_info sample time (the
// resource's, written with every push), for a failure.
func newestSamples(c *cell, f *clientMetricsFixture, start time.Time) string {
	ctx, cancel := c.ctx()
	defer cancel()
	vec, err := f.prom.Query(ctx, `max by (client_id) (timestamp({__name__="target_info"}))`, start.Add(-5*time.Minute))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, s := range vec {
		out = append(out, fmt.Sprintf("%s %.3f", s.Metric.Get("client_id"), s.F))
	}
	return strings.Join(out, ", ")
}
