package admin

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// probeReuse is how old the last /readyz answer may be for a scrape to
// report it instead of checking again. The kubelet probes /readyz every
// few seconds; without this each scrape would add its own broker
// connection (and, with SASL origination, its own login) to the probes'.
const probeReuse = 10 * time.Second

// readyGauge exports what /readyz says as kproxy_ready (1 or 0), so an alert
// can tell "process up but not taking traffic" from "process gone" (`up`
// says only the latter). A scrape reports the last /readyz answer when it
// is under probeReuse old, else runs the check itself; each scrape
// answers with its own value, so two scrapes at once (two Prometheus
// replicas) never see each other's.
type readyGauge struct {
	opts prometheus.GaugeOpts
	now  func() time.Time

	mu       sync.Mutex
	probedAt time.Time // when /readyz last answered; zero before
	probed   bool      // what it answered
}

func newReadyGauge() *readyGauge {
	return &readyGauge{now: time.Now, opts: prometheus.GaugeOpts{Name: "kproxy_ready",
		Help: "1 when /readyz would answer 200 (listening, upstream reachable, not draining), else 0; the last /readyz answer when under 10 s old, else checked at the scrape."}}
}

// probe records what /readyz answered.
func (rg *readyGauge) probe(ready bool) {
	rg.mu.Lock()
	rg.probedAt, rg.probed = rg.now(), ready
	rg.mu.Unlock()
}

// recent returns the last /readyz answer if it is under probeReuse old.
func (rg *readyGauge) recent() (ready, ok bool) {
	rg.mu.Lock()
	defer rg.mu.Unlock()
	if rg.probedAt.IsZero() || rg.now().Sub(rg.probedAt) >= probeReuse {
		return false, false
	}
	return rg.probed, true
}

// readyzHandler answers /readyz from the check and remembers the answer.
func (rg *readyGauge) readyzHandler(ready ReadyFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := ready(r.Context())
		rg.probe(err == nil)
		if err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	}
}

// metricsHandler serves g's metrics with kproxy_ready: the last /readyz
// answer if recent, else the check's result now.
func (rg *readyGauge) metricsHandler(g prometheus.Gatherer, ready ReadyFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, recent := rg.recent()
		if !recent {
			ok = ready(r.Context()) == nil
		}
		v := 0.0
		if ok {
			v = 1
		}
		// A registry per scrape: the value belongs to this request alone.
		reg := prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewGaugeFunc(rg.opts, func() float64 { return v }))
		promhttp.HandlerFor(prometheus.Gatherers{g, reg}, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
}
