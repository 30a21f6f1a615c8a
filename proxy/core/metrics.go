package core

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/relay"
)

// Metrics are the Prometheus collectors of the drivers (connections,
// buffers, batches, closes), with the sessions' own (relay.Metrics).
type Metrics struct {
	// Relay are the collectors of what the sessions relay.
	Relay        *relay.Metrics
	Open         prometheus.Gauge
	Accepted     prometheus.Counter
	Refused      *prometheus.CounterVec
	DialFailures prometheus.Counter
	ProtocolErrs *prometheus.CounterVec
	Oversize     *prometheus.CounterVec
	Overflow     *prometheus.CounterVec
	WriteStalls  *prometheus.CounterVec
	OverBudget   *prometheus.CounterVec
	Buffered     prometheus.GaugeFunc
	// budgetUsed is the core's count behind Buffered (Budget.used), set
	// by New.
	budgetUsed atomic.Pointer[atomic.Int64]
	Batches    *prometheus.CounterVec
	// Brokers and Discoveries are cluster mode's: the brokers known (from
	// Topo, set by SetCluster) and the discoveries through the bootstrap.
	Brokers     prometheus.GaugeFunc
	Topo        atomic.Pointer[cluster.Topology]
	Discoveries *prometheus.CounterVec
	// Batch[d][w] counts batches of direction d (requests, responses)
	// relayed where w says (on the poller, in the pool).
	Batch [2][2]prometheus.Counter
}

// NewMetrics registers the relay's collectors with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{
		Relay: relay.NewMetrics(reg),
		Open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kproxy_connections_open",
			Help: "Client connections currently paired with an upstream."}),
		Accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_connections_total",
			Help: "Client connections paired with an upstream."}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_connections_refused_total",
			Help: "Client connections closed before pairing, by reason."}, []string{"reason"}),
		DialFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_upstream_dial_failures_total",
			Help: "Failed attempts to connect to the upstream."}),
		ProtocolErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_protocol_errors_total",
			Help: "Pairs closed for a Kafka protocol error, by kind."}, []string{"kind"}),
		Oversize: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_oversize_closes_total",
			Help: "Connections closed for a frame size over the limit, by side."}, []string{"side"}),
		Overflow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_unread_overflow_closes_total",
			Help: "Connections closed for unread input over max_unread_bytes, by side."}, []string{"side"}),
		WriteStalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_write_stall_closes_total",
			Help: "Connections closed because a write to that side made no progress for write_timeout, by side."}, []string{"side"}),
		OverBudget: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_buffer_budget_closes_total",
			Help: "Connections closed because the bytes they held would take all connections past max_buffered_bytes, by side."}, []string{"side"}),
		Batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_batches_total",
			Help: "Batches of frames relayed, by direction and by where: on the poller, or in the goroutine pool (partial frames, throttling rules, back-pressure, linger)."},
			[]string{"direction", "where"}),
	}
	m.Buffered = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kproxy_buffered_bytes",
		Help: "Bytes held in partial frames, unread input and batches waiting to be flushed to a peer, as charged against max_buffered_bytes."},
		func() float64 {
			if u := m.budgetUsed.Load(); u != nil {
				return float64(u.Load())
			}
			return 0
		})
	m.Brokers = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kproxy_cluster_brokers",
		Help: "Brokers of the fronted cluster whose address kproxy knows (cluster mode; 0 otherwise)."},
		func() float64 {
			if t := m.Topo.Load(); t != nil {
				return float64(t.Nodes())
			}
			return 0
		})
	m.Discoveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_cluster_discoveries_total",
		Help: "Metadata requests kproxy made itself to the bootstrap to learn the cluster's brokers, by result (ok, error)."}, []string{"result"})
	for _, c := range []prometheus.Collector{m.Open, m.Accepted, m.Refused, m.DialFailures, m.ProtocolErrs,
		m.Oversize, m.Overflow, m.WriteStalls, m.OverBudget, m.Buffered, m.Batches, m.Brokers, m.Discoveries} {
		f(c)
	}
	// The closes by side start at 0 on both sides: an alert on increase()
	// sees a counter's first close only if the series existed before it.
	for _, v := range []*prometheus.CounterVec{m.Oversize, m.Overflow, m.WriteStalls, m.OverBudget} {
		for _, side := range []string{"client", "upstream"} {
			v.WithLabelValues(side)
		}
	}
	for d, dir := range []string{"requests", "responses"} {
		for w, where := range []string{"poller", "pool"} {
			m.Batch[d][w] = m.Batches.WithLabelValues(dir, where)
		}
	}
	return m
}

// Indexes of Metrics.Batch.
const (
	BatchRequests, BatchResponses = 0, 1
	OnPoller, InPool              = 0, 1
)

// watchBudget has the Buffered gauge read b.
func (m *Metrics) watchBudget(b *Budget) { m.budgetUsed.Store(&b.used) }
