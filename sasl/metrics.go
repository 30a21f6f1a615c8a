package sasl

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the SASL origination collectors. A nil *Metrics counts
// nothing, for tests and tools that do not serve metrics.
type Metrics struct {
	auths *prometheus.CounterVec
	// byKind[reauth][result] saves a label lookup per authentication
	// (results: error, ok, cancelled).
	byKind [2][3]prometheus.Counter
	// refused counts clients refused without a login, by why.
	refused *prometheus.CounterVec
	// tokenFetches[ok] counts fetches from the OAuth token endpoint
	// (sasl.upstream.oauth); tokenExpiry is the current token's expiry.
	tokenFetches [2]prometheus.Counter
	tokenExpiry  prometheus.Gauge
}

// Authentication kinds and results, the label values of
// kproxy_sasl_authentications_total.
const (
	KindInitial = "initial"
	KindReauth  = "reauth"
	ResultOK    = "ok"
	ResultError = "error"
	// ResultCancelled is an authentication its connection's end cut
	// short: it says nothing about the credentials.
	ResultCancelled = "cancelled"
	// Reasons of kproxy_sasl_logins_refused_total.
	RefusedBackoff = "backoff"
	RefusedLimit   = "limit"
)

// NewMetrics registers the collectors with reg. Every series exists from
// the start, at 0, so an alert on a rate sees it.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{auths: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_sasl_authentications_total",
		Help: "SASL authentications kproxy ran to brokers (sasl.upstream), by kind (initial: a new connection; reauth: KIP-368 re-authentication of a live one) and result (ok, error, cancelled: cut short by its connection's end)."},
		[]string{"kind", "result"})}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_sasl_logins_refused_total",
		Help: "Client connections reset without a login at the brokers (sasl.upstream), by reason (backoff: logins kept failing; limit: max_logins_per_second or max_concurrent_logins kept it waiting past its deadline)."},
		[]string{"reason"})
	fetches := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_oauth_token_fetches_total",
		Help: "Token requests kproxy made to the OAuth token endpoint (sasl.upstream.oauth), by result (ok, error)."}, []string{"result"})
	m.tokenFetches = [2]prometheus.Counter{fetches.WithLabelValues(ResultError), fetches.WithLabelValues(ResultOK)}
	m.tokenExpiry = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kproxy_oauth_token_expiry_timestamp_seconds",
		Help: "When the OAuth token kproxy authenticates with expires (unix seconds); 0 before the first token (sasl.upstream.oauth)."})
	reg.MustRegister(m.auths, m.refused, fetches, m.tokenExpiry)
	for _, r := range []string{RefusedBackoff, RefusedLimit} {
		m.refused.WithLabelValues(r)
	}
	for i, kind := range []string{KindInitial, KindReauth} {
		for j, result := range []string{ResultError, ResultOK, ResultCancelled} {
			m.byKind[i][j] = m.auths.WithLabelValues(kind, result)
		}
	}
	return m
}

func (m *Metrics) count(reauth, ok bool) {
	j := 0
	if ok {
		j = 1
	}
	m.countAs(reauth, j)
}

// cancelled counts an authentication its connection's end cut short.
func (m *Metrics) cancelled(reauth bool) { m.countAs(reauth, 2) }

func (m *Metrics) countAs(reauth bool, result int) {
	if m == nil {
		return
	}
	i := 0
	if reauth {
		i = 1
	}
	m.byKind[i][result].Inc()
}

func (m *Metrics) refuse(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// tokenFetched counts a token fetch and, when it worked, the new expiry.
func (m *Metrics) tokenFetched(ok bool, expiry time.Time) {
	if m == nil {
		return
	}
	if !ok {
		m.tokenFetches[0].Inc()
		return
	}
	m.tokenFetches[1].Inc()
	m.tokenExpiry.Set(float64(expiry.UnixMilli()) / 1000)
}
