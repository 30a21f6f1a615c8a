package proxy

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kproxy/kproxy/policy"
)

// policyEvents returns the attributes of the kproxy.policy events of the
// spans of one API key.
func policyEvents(spans tracetest.SpanStubs, key string) []map[attribute.Key]string {
	var out []map[attribute.Key]string
	for _, s := range spans {
		if attrMap(s)["kproxy.api_key"].Emit() != key {
			continue
		}
		for _, e := range s.Events {
			if e.Name != "kproxy.policy" {
				continue
			}
			m := map[attribute.Key]string{}
			for _, kv := range e.Attributes {
				m[kv.Key] = kv.Value.Emit()
			}
			out = append(out, m)
		}
	}
	return out
}

// A trace must say why kproxy answered or delayed a request itself: the
// span carries a kproxy.policy event naming the rule and the action.
func TestPolicySpanEvents(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	env := startTracedKfake(t, nil, tr)
	applyPolicies(t, env,
		policy.Rule{Name: "no-deletes", Action: policy.ActionReject, Match: policy.Selector{APIs: []string{"DeleteTopics"}}},
		policy.Rule{Name: "slow-versions", Action: policy.ActionThrottle, Match: policy.Selector{APIs: []string{"ApiVersions"}},
			Limits: policy.Limits{RequestsPerSecond: 1, Key: "connection"}})
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 4
	del.TopicNames = []string{"doomed"}
	c := dialRaw(t, env.addr)
	// The second ApiVersions is over 1/s; the delete is refused.
	c.Write(append(append(apiVersionsV0(1), apiVersionsV0(2)...), encodeRequest(del, 3)...))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := 0; i < 3; i++ {
		if _, err := readFrame(c); err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
	}
	spans := flush()
	check := func(key, rule, action string) {
		t.Helper()
		evs := policyEvents(spans, key)
		if len(evs) != 1 {
			t.Fatalf("api key %s: %d kproxy.policy events, want 1: %v", key, len(evs), evs)
		}
		if evs[0]["kproxy.policy.rule"] != rule || evs[0]["kproxy.policy.action"] != action {
			t.Fatalf("api key %s: event %v, want rule %s action %s", key, evs[0], rule, action)
		}
		if evs[0]["kproxy.policy.reason"] == "" {
			t.Errorf("api key %s: event has no reason", key)
		}
	}
	check("20", "no-deletes", "reject")
	check("18", "slow-versions", "throttle")
}
