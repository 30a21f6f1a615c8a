package proxy

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/framing"
)

// Metrics are the relay's Prometheus collectors. Per-API series are resolved
// once per API key and kept in an array, so counting a frame is an atomic
// add with no label lookup.
type Metrics struct {
	requests     *prometheus.CounterVec
	responses    *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	bytes        *prometheus.CounterVec
	inFlight     prometheus.Gauge
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
	budgetUsed       atomic.Pointer[atomic.Int64]
	failed           prometheus.Counter
	backpressure     prometheus.Counter
	oversizeAnswered prometheus.Counter
	bytesIn          prometheus.Counter
	bytesOut         prometheus.Counter
	batches          *prometheus.CounterVec
	// batch[d][w] counts batches of direction d (requests, responses)
	// relayed where w says (on the poller, in the pool).
	batch  [2][2]prometheus.Counter
	perAPI [framing.MaxKey + 2]atomic.Pointer[apiMetrics]
}

type apiMetrics struct {
	requests  prometheus.Counter
	responses prometheus.Counter
	latency   prometheus.Observer
}

// NewMetrics registers the relay's collectors with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_requests_total",
			Help: "Requests read from clients, by Kafka API."}, []string{"api"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_responses_total",
			Help: "Responses written to clients, by Kafka API."}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kproxy_request_duration_seconds",
			Help:    "Time from a whole request read to its response written, by Kafka API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"api"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_bytes_total",
			Help: "Frame bytes relayed, by direction."}, []string{"direction"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kproxy_in_flight_requests",
			Help: "Requests forwarded upstream and not yet answered."}),
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
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_requests_failed_total",
			Help: "In-flight requests failed because their pair closed."}),
		backpressure: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_backpressure_waits_total",
			Help: "Times a client was paused because its in-flight table was full."}),
		oversizeAnswered: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_oversize_answered_total",
			Help: "Requests over a rule's max_request_bytes, dropped as they arrived and answered with an error."}),
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
	for _, c := range []prometheus.Collector{m.requests, m.responses, m.latency, m.bytes, m.inFlight, m.open,
		m.accepted, m.refused, m.dialFailures, m.protocolErrs, m.oversize, m.overflow, m.writeStalls, m.overBudget, m.buffered, m.failed, m.backpressure,
		m.oversizeAnswered, m.batches} {
		f(c)
	}
	m.bytesIn = m.bytes.WithLabelValues("client_to_upstream")
	m.bytesOut = m.bytes.WithLabelValues("upstream_to_client")
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

// api returns the series of one API key, creating them on first use.
func (m *Metrics) api(key int16) *apiMetrics {
	i := int(key)
	if i < 0 || i > framing.MaxKey {
		i = framing.MaxKey + 1
	}
	if a := m.perAPI[i].Load(); a != nil {
		return a
	}
	name := framing.Name(key)
	a := &apiMetrics{
		requests:  m.requests.WithLabelValues(name),
		responses: m.responses.WithLabelValues(name),
		latency:   m.latency.WithLabelValues(name),
	}
	if !m.perAPI[i].CompareAndSwap(nil, a) {
		return m.perAPI[i].Load()
	}
	return a
}
