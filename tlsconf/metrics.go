package tlsconf

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the TLS collectors. A nil *Metrics counts nothing, for tests
// and tools that do not serve metrics.
type Metrics struct {
	handshakes *prometheus.CounterVec
	expiryTS   *prometheus.GaugeVec
	reloads    *prometheus.CounterVec
	// byResult[side][result] saves a label lookup per handshake.
	byResult [2]map[string]prometheus.Counter
}

// NewMetrics registers the TLS collectors with reg. Every side and result
// series exists from the start, at 0, so an alert on a rate sees it.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_tls_handshakes_total",
			Help: "TLS handshakes, by side (client: clients -> kproxy; upstream: kproxy -> broker) and result (ok, or why it failed)."},
			[]string{"side", "result"}),
		expiryTS: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kproxy_tls_certificate_expiry_timestamp_seconds",
			Help: "When the certificates of a loaded file expire (the earliest NotAfter in the file, as a Unix time), by side (client: tls.listener's files; upstream: tls.upstream's) and file; updated on reload."},
			[]string{"side", "file"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_tls_reloads_total",
			Help: "Changes to TLS files seen, by side (client: tls.listener's files; upstream: tls.upstream's) and result: ok (now in force) or error (refused; the previous material stays)."},
			[]string{"side", "result"}),
	}
	reg.MustRegister(m.handshakes, m.expiryTS, m.reloads)
	for i, side := range []string{SideClient, SideUpstream} {
		m.byResult[i] = map[string]prometheus.Counter{}
		for _, r := range Results {
			m.byResult[i][r] = m.handshakes.WithLabelValues(side, r)
		}
		for _, r := range []string{"ok", "error"} {
			m.reloads.WithLabelValues(side, r)
		}
	}
	return m
}

// Handshake counts one handshake on side (SideClient or SideUpstream) and
// returns err described for the log line (a *HandshakeError naming the
// cause), or nil when err is nil.
func (m *Metrics) Handshake(side string, err error) error {
	result := ClassifyHandshakeError(err)
	if m != nil {
		i := 0
		if side == SideUpstream {
			i = 1
		}
		m.byResult[i][result].Inc()
	}
	if err == nil {
		return nil
	}
	return &HandshakeError{Side: side, Result: result, Err: err}
}

func (m *Metrics) expiry(side, file string, t time.Time) {
	if m != nil {
		m.expiryTS.WithLabelValues(side, file).Set(float64(t.Unix()))
	}
}

func (m *Metrics) reload(side, result string) {
	if m != nil {
		m.reloads.WithLabelValues(side, result).Inc()
	}
}

// HandshakeConn runs c's handshake bounded by timeout, counts its outcome
// on side and returns the failure described (see Handshake). A handshake
// still going at timeout fails with result timeout and closes c.
func (m *Metrics) HandshakeConn(c *tls.Conn, side string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return m.Handshake(side, c.HandshakeContext(ctx))
}
