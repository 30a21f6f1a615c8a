package audit

import "github.com/prometheus/client_golang/prometheus"

// Reasons a line is dropped, the values of kproxy_audit_dropped_total's
// reason label.
const (
	dropQueueFull   = "queue_full"   // the writer is behind: the queue is at its bound
	dropWriteFailed = "write_failed" // the output returned an error
	dropClosed      = "closed"       // finished after Close, or still queued at its deadline
)

// Metrics are the audit log's counters. A line the log could not keep is
// never silent: an audit trail with holes must say so.
type Metrics struct {
	lines       prometheus.Counter
	dropped     *prometheus.CounterVec
	writeErrors prometheus.Counter
}

// NewMetrics makes the counters and registers them with reg, once per
// process (a reload keeps them); with a nil reg they count unregistered.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lines: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kproxy_audit_lines_total",
			Help: "Audit lines written to the output.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kproxy_audit_dropped_total",
			Help: "Audit lines lost: the queue was full, the output failed, or the log was closing.",
		}, []string{"reason"}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kproxy_audit_write_errors_total",
			Help: "Writes to the audit output that returned an error.",
		}),
	}
	for _, r := range []string{dropQueueFull, dropWriteFailed, dropClosed} {
		m.dropped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.lines, m.dropped, m.writeErrors)
	}
	return m
}

func (m *Metrics) drop(reason string) { m.dropped.WithLabelValues(reason).Inc() }
