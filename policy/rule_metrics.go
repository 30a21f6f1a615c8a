// This file holds the per-rule Prometheus counters: registered once
// (NewMetrics) and shared by every Engine a reload builds, so a rule's
// counts survive a reload under the same name.

package policy

import (
	"github.com/prometheus/client_golang/prometheus"
)

type ruleMetrics struct {
	matched, throttled, rejected, logged prometheus.Counter
	delay, closed                        prometheus.Counter
}

// Metrics are the per-rule counters, registered once and shared by every
// Engine a reload builds.
type Metrics struct {
	matched, throttled, rejected, logged, delay, closed *prometheus.CounterVec
	// violations counts content rules' broken conditions, by rule and
	// condition, whatever the action.
	violations *prometheus.CounterVec
}

// NewMetrics registers the policy counters with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	v := func(name, help string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"rule"})
		reg.MustRegister(c)
		return c
	}
	viol := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_policy_violations_total",
		Help: "Requests that broke a condition of a rule's require block, by rule and condition (configs.<name> for a config), whatever the rule's action."},
		[]string{"rule", "condition"})
	reg.MustRegister(viol)
	return &Metrics{violations: viol,
		matched:   v("kproxy_policy_matched_total", "Requests a rule's selector matched."),
		throttled: v("kproxy_policy_throttled_total", "Requests throttled by a rule."),
		rejected:  v("kproxy_policy_rejected_total", "Requests refused by a rule."),
		logged:    v("kproxy_policy_logged_total", "Requests a log-only rule would have acted on."),
		delay:     v("kproxy_policy_throttle_seconds_total", "Throttle time handed out by a rule."),
		closed:    v("kproxy_policy_closed_total", "Connections closed because a rule refused a request that cannot be answered (acks=0 produce, or a produce over max_request_bytes naming more partitions than kproxy keeps to answer)."),
	}
}

// Closed counts a connection the relay closed because the named rule
// refused a request it could not answer.
func (e *Engine) Closed(rule string) {
	if r := e.rule(rule); r != nil {
		r.m.closed.Inc()
	}
}
