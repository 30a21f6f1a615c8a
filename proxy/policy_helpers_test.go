package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

// policySet is the policy counters of one kproxy, kept across reloads the
// way the service keeps them (registering them twice would panic).
type policySet struct {
	reg *prometheus.Registry
	m   *policy.Metrics
}

// applyPolicies validates rules and puts them in force on env's kproxy.
func applyPolicies(t testing.TB, env *testEnv, rules ...policy.Rule) *policySet {
	t.Helper()
	reg := prometheus.NewRegistry()
	ps := &policySet{reg: reg, m: policy.NewMetrics(reg)}
	ps.reload(t, env, rules...)
	return ps
}

// reload replaces the rule set, as a config reload does.
func (ps *policySet) reload(t testing.TB, env *testEnv, rules ...policy.Rule) {
	t.Helper()
	c := policy.Config{Rules: rules}
	if err := c.Validate(); err != nil {
		t.Fatalf("test rules are invalid: %v", err)
	}
	env.srv.SetPolicies(policy.New(c, ps.m))
}

// count is a policy counter (kproxy_policy_*_total) for one rule.
func (ps *policySet) count(t testing.TB, name, rule string) float64 {
	t.Helper()
	return metricValue(t, ps.reg, name, map[string]string{"rule": rule})
}

// metricValue is the counter of reg named name whose labels include
// every one of labels (the first such series).
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// accepted is kproxy_connections_total: a client that reconnected raises it.
func (e *testEnv) accepted() float64 { return testutil.ToFloat64(e.m.Accepted) }

// decodeResponse parses a response frame the way a client does, without
// kproxy's framing package: size, correlation id, the header's tagged
// fields when the response is flexible (never for ApiVersions), body.
func decodeResponse(t testing.TB, frame []byte, key, version int16) kmsg.Response {
	t.Helper()
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	body := frame[8:]
	if resp.IsFlexible() && key != 18 {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("%s v%d response: header tagged fields %x, want none", kmsg.NameForKey(key), version, body[:min(len(body), 1)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d response (corr %d) does not parse: %v", kmsg.NameForKey(key), version, corrOf(frame), err)
	}
	return resp
}
