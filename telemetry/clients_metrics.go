package telemetry

import "github.com/prometheus/client_golang/prometheus"

// ClientsMetrics count what telemetry.clients receives and exports.
type ClientsMetrics struct {
	subscriptions prometheus.Counter
	pushes        *prometheus.CounterVec // by result: ok or the refusal
	exported      prometheus.Counter
	dropped       *prometheus.CounterVec // by reason
}

// NewClientsMetrics registers the client-metrics counters with reg.
func NewClientsMetrics(reg prometheus.Registerer) *ClientsMetrics {
	m := &ClientsMetrics{
		subscriptions: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_client_metrics_subscriptions_total",
			Help: "GetTelemetrySubscriptions requests kproxy answered (telemetry.clients)."}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_client_metrics_pushes_total",
			Help: "PushTelemetry requests kproxy answered, by result: ok, or the refusal (invalid_record, too_large, unknown_subscription, unsupported_compression, throttled, busy, invalid_request)."}, []string{"result"}),
		exported: prometheus.NewCounter(prometheus.CounterOpts{Name: "kproxy_client_metrics_exported_total",
			Help: "Pushes exported to the OTLP metrics collector."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_client_metrics_dropped_total",
			Help: "Accepted pushes not exported, by reason: queue_full (the collector is slower than the clients) or export_failed."}, []string{"reason"}),
	}
	for _, r := range []string{"ok", "invalid_record", "too_large", "unknown_subscription", "unsupported_compression", "throttled", "busy", "invalid_request"} {
		m.pushes.WithLabelValues(r)
	}
	m.dropped.WithLabelValues("queue_full")
	m.dropped.WithLabelValues("export_failed")
	if reg != nil {
		reg.MustRegister(m.subscriptions, m.pushes, m.exported, m.dropped)
	}
	return m
}
