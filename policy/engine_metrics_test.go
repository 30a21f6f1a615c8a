package policy

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every rule has its own matched, throttled, throttle_seconds, rejected
// and logged counters, labelled by rule name.
func TestMetricsPerRule(t *testing.T) {
	e, m := newEngine(t,
		Rule{Name: "watch", Action: ActionLog, Match: Selector{ClientID: "app-*"}},
		Rule{Name: "slow", Action: ActionThrottle, Match: Selector{APIs: []string{"Produce"}}, Limits: Limits{RequestsPerSecond: 1}},
		deny("no-fetch", Selector{APIs: []string{"Fetch"}}),
		deny("unused", Selector{ClientID: "nobody"}),
	)
	p := request(t, produce("orders"), "app-1")
	for i := 0; i < 3; i++ {
		p.check(e, t0) // pass, throttle 1s, throttle 2s
	}
	request(t, fetch("orders"), "app-1").check(e, t0)
	request(t, fetch("orders"), "web").check(e, t0)

	want := map[string][5]float64{ // matched, throttled, throttle seconds, rejected, logged
		"watch":    {4, 0, 0, 0, 4},
		"slow":     {3, 2, 3, 0, 0},
		"no-fetch": {2, 0, 0, 2, 0},
		"unused":   {0, 0, 0, 0, 0},
	}
	for name, w := range want {
		got := [5]float64{count(m.matched, name), count(m.throttled, name), count(m.delay, name),
			count(m.rejected, name), count(m.logged, name)}
		for i := range got {
			if d := got[i] - w[i]; d > 1e-6 || d < -1e-6 {
				t.Fatalf("rule %s: counters (matched, throttled, seconds, rejected, logged) %v, want %v", name, got, w)
			}
		}
	}
}

// The counters are registered under their documented names, one series
// per rule from the moment the engine is built.
func TestMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := New(Config{Rules: []Rule{{Name: "watch", Action: ActionLog}, deny("no", Selector{ClientID: "x"})}}, NewMetrics(reg))
	request(t, produce("orders"), "app-1").check(e, t0)
	want := `
# HELP kproxy_policy_logged_total Requests a log-only rule would have acted on.
# TYPE kproxy_policy_logged_total counter
kproxy_policy_logged_total{rule="no"} 0
kproxy_policy_logged_total{rule="watch"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kproxy_policy_logged_total"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kproxy_policy_matched_total", "kproxy_policy_throttled_total",
		"kproxy_policy_throttle_seconds_total", "kproxy_policy_rejected_total", "kproxy_policy_logged_total"} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 2 {
			t.Fatalf("%s: %d series (%v), want one per rule", name, n, err)
		}
	}
}
