package proxy

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/relay"
)

// Metrics are the Prometheus collectors of the drivers (connections,
// buffers, batches, closes), with the sessions' own (relay.Metrics).
type Metrics struct {
	// relay are the collectors of what the sessions relay.
	relay        *relay.Metrics
	open         prometheus.Gauge
	accepted     prometheus.Counter
	refused      *prometheus.CounterVec
	dialFailures prometheus.Counter
	protocolErrs *prometheus.CounterVec
	oversize     *prometheus.CounterVec
	overflow     *prometheus.CounterVec
	writeStalls  *prometheus.CounterVec
	overBudget   *prometheus.CounterVec
	buffered     prometheus.GaugeFunc
	// budgetUsed is the server's count behind buffered (budget.used),
	// set by New.
	budgetUsed atomic.Pointer[atomic.Int64]
	batches    *prometheus.CounterVec
	// brokers and discoveries are cluster mode's: the brokers known (from
	// topo, set by SetCluster) and the discoveries through the bootstrap.
	brokers     prometheus.GaugeFunc
	topo        atomic.Pointer[cluster.Topology]
	discoveries *prometheus.CounterVec
	// batch[d][w] counts batches of direction d (requests, responses)
	// relayed where w says (on the poller, in the pool).
	batch [2][2]prometheus.Counter
}

// NewMetrics registers the relay's collectors with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{
		relay: relay.NewMetrics(reg),
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kproxy_connections_open",
			Help: "Client connections currently paired with an upstream."}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_connections_total",
			Help: "Client connections paired with an upstream."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_connections_refused_total",
			Help: "Client connections closed before pairing, by reason."}, []string{"reason"}),
		dialFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_upstream_dial_failures_total",
			Help: "Failed attempts to connect to the upstream."}),
		protocolErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_protocol_errors_total",
			Help: "Pairs closed for a Kafka protocol error, by kind."}, []string{"kind"}),
		oversize: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_oversize_closes_total",
			Help: "Connections closed for a frame size over the limit, by side."}, []string{"side"}),
		overflow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_unread_overflow_closes_total",
			Help: "Connections closed for unread input over max_unread_bytes, by side."}, []string{"side"}),
		writeStalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_write_stall_closes_total",
			Help: "Connections closed because a write to that side made no progress for write_timeout, by side."}, []string{"side"}),
		overBudget: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_buffer_budget_closes_total",
			Help: "Connections closed because the bytes they held would take all connections past max_buffered_bytes, by side."}, []string{"side"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_batches_total",
			Help: "Batches of frames relayed, by direction and by where: on the poller, or in the goroutine pool (partial frames, throttling rules, back-pressure, linger)."},
			[]string{"direction", "where"}),
	}
	m.buffered = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kproxy_buffered_bytes",
		Help: "Bytes held in partial frames, unread input and batches waiting to be flushed to a peer, as charged against max_buffered_bytes."},
		func() float64 {
			if u := m.budgetUsed.Load(); u != nil {
				return float64(u.Load())
			}
			return 0
		})
	m.brokers = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kproxy_cluster_brokers",
		Help: "Brokers of the fronted cluster whose address kproxy knows (cluster mode; 0 otherwise)."},
		func() float64 {
			if t := m.topo.Load(); t != nil {
				return float64(t.Nodes())
			}
			return 0
		})
	m.discoveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_cluster_discoveries_total",
		Help: "Metadata requests kproxy made itself to the bootstrap to learn the cluster's brokers, by result (ok, error)."}, []string{"result"})
	for _, c := range []prometheus.Collector{m.open, m.accepted, m.refused, m.dialFailures, m.protocolErrs,
		m.oversize, m.overflow, m.writeStalls, m.overBudget, m.buffered, m.batches, m.brokers, m.discoveries} {
		f(c)
	}
	// The closes by side start at 0 on both sides: an alert on increase()
	// sees a counter's first close only if the series existed before it.
	for _, v := range []*prometheus.CounterVec{m.oversize, m.overflow, m.writeStalls, m.overBudget} {
		for _, side := range []string{"client", "upstream"} {
			v.WithLabelValues(side)
		}
	}
	for d, dir := range []string{"requests", "responses"} {
		for w, where := range []string{"poller", "pool"} {
			m.batch[d][w] = m.batches.WithLabelValues(dir, where)
		}
	}
	return m
}

// Indexes of Metrics.batch.
const (
	batchRequests, batchResponses = 0, 1
	onPoller, inPool              = 0, 1
)
