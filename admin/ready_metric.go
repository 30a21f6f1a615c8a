package admin

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyGauge exports what /readyz says as kproxy_ready (1 or 0), so an alert
// can tell "process up but not taking traffic" from "process gone" (`up`
// says only the latter). Each scrape runs the check /readyz runs and
// answers with its own result, so it is never staler than the scrape, and
// two scrapes at once (two Prometheus replicas) never see each other's.
type readyGauge struct {
	opts prometheus.GaugeOpts
}

func newReadyGauge() *readyGauge {
	return &readyGauge{opts: prometheus.GaugeOpts{Name: "kproxy_ready",
		Help: "1 when /readyz would answer 200 (listening, upstream reachable, not draining), else 0; updated at each scrape."}}
}

// metricsHandler runs the readiness check, then serves g's metrics and
// that check's kproxy_ready together.
func (rg *readyGauge) metricsHandler(g prometheus.Gatherer, ready ReadyFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := 0.0
		if ready(r.Context()) == nil {
			v = 1
		}
		// A registry per scrape: the value belongs to this request alone.
		reg := prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewGaugeFunc(rg.opts, func() float64 { return v }))
		promhttp.HandlerFor(prometheus.Gatherers{g, reg}, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
}
