package relay

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/framing"
)

// Metrics are the Prometheus collectors of what sessions relay, whatever
// the transport. Per-API series are resolved once per API key and kept in
// an array, so counting a frame is an atomic add with no label lookup. The
// collectors are exported for reading (tests, other packages' metrics);
// only sessions add to them.
type Metrics struct {
	Requests         *prometheus.CounterVec
	Responses        *prometheus.CounterVec
	Latency          *LatencyVec
	Bytes            *prometheus.CounterVec
	InFlight         prometheus.Gauge
	Failed           prometheus.Counter
	Backpressure     prometheus.Counter
	OversizeAnswered prometheus.Counter
	RackFilled       prometheus.Counter
	BytesIn          prometheus.Counter
	BytesOut         prometheus.Counter
	perAPI           [framing.MaxKey + 2]atomic.Pointer[apiMetrics]
}

type apiMetrics struct {
	Requests  prometheus.Counter
	Responses prometheus.Counter
	Latency   *latency
}

// NewMetrics registers the collectors with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_requests_total",
			Help: "Requests read from clients, by Kafka API."}, []string{"api"}),
		Responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_responses_total",
			Help: "Responses written to clients, by Kafka API."}, []string{"api"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_bytes_total",
			Help: "Frame bytes relayed, by direction."}, []string{"direction"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kproxy_in_flight_requests",
			Help: "Requests forwarded upstream and not yet answered."}),
		Failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_requests_failed_total",
			Help: "In-flight requests failed because their pair closed."}),
		Backpressure: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_backpressure_waits_total",
			Help: "Times a client was paused because its in-flight table was full."}),
		OversizeAnswered: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_oversize_answered_total",
			Help: "Requests over a rule's max_request_bytes, dropped as they arrived and answered with an error."}),
		RackFilled: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_fetch_rack_filled_total",
			Help: "Fetch requests whose empty rack_id kproxy filled with proxy.client_rack."}),
	}
	m.Latency = &LatencyVec{m: m, desc: prometheus.NewDesc("kproxy_request_duration_seconds",
		"Time from a whole request read to its response written, by Kafka API.", []string{"api"}, nil)}
	for _, c := range []prometheus.Collector{m.Requests, m.Responses, m.Latency, m.Bytes, m.InFlight,
		m.Failed, m.Backpressure, m.OversizeAnswered, m.RackFilled} {
		reg.MustRegister(c)
	}
	m.BytesIn = m.Bytes.WithLabelValues("client_to_upstream")
	m.BytesOut = m.Bytes.WithLabelValues("upstream_to_client")
	return m
}

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
		Requests:  m.Requests.WithLabelValues(name),
		Responses: m.Responses.WithLabelValues(name),
		Latency:   &latency{desc: m.Latency.desc, api: name},
	}
	if !m.perAPI[i].CompareAndSwap(nil, a) {
		return m.perAPI[i].Load()
	}
	return a
}
