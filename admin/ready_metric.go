package admin

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyGauge exports what /readyz says as kproxy_ready (1 or 0), so an alert
// can tell "process up but not taking traffic" from "process gone" (`up`
// says only the latter). It is set by the same check /readyz runs, at each
// scrape, so it is never staler than the scrape itself.
type readyGauge struct {
	gauge prometheus.Gauge
	reg   *prometheus.Registry
}

func newReadyGauge() *readyGauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kproxy_ready",
		Help: "1 when /readyz would answer 200 (listening, upstream reachable, not draining), else 0; updated at each scrape."})
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	return &readyGauge{gauge: g, reg: reg}
}

// metricsHandler runs the readiness check, then serves g's metrics and
// kproxy_ready together.
func (rg *readyGauge) metricsHandler(g prometheus.Gatherer, ready ReadyFunc) http.Handler {
	inner := promhttp.HandlerFor(prometheus.Gatherers{g, rg.reg}, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ready(r.Context()) == nil {
			rg.gauge.Set(1)
		} else {
			rg.gauge.Set(0)
		}
		inner.ServeHTTP(w, r)
	})
}
