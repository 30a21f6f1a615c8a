package proxy

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
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

// A request refused by max_request_bytes, whose body kproxy drops unread,
// still gets its span from the header: one span with the policy event,
// ended when the answer is written.
func TestPolicySpanOversize(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	env := startTracedKfake(t, []kfake.Opt{kfake.SeedTopics(2, "big")}, tr)
	applyPolicies(t, env, maxRequestRuleFor("max-64k", 64<<10))
	req := produceRequest(7, -1, "big")
	req.Topics[0].Partitions[0].Records = make([]byte, 100<<10)
	frame := encodeRequest(req, 41)
	c := dialRaw(t, env.addr)
	c.Write(frame)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if f, err := readFrame(c); err != nil || corrOf(f) != 41 {
		t.Fatalf("answer to the oversize produce: %v", err)
	}
	s := oneRefusedSpan(t, flush(), "max-64k")
	wantAttrs(t, s, map[string]string{"kproxy.correlation_id.client": "41", "kproxy.request_bytes": strconv.Itoa(len(frame)),
		"messaging.client.id": "raw-test", "kproxy.body_decoded": "false", "error.type": "MESSAGE_TOO_LARGE"})
	if _, ok := attrMap(s)["messaging.batch.message_count"]; ok {
		t.Error("span counts the messages of a body kproxy never read")
	}
}

// An oversize Produce naming more partitions than kproxy keeps to answer
// is closed on, and its span says so.
func TestPolicySpanOversizeClosed(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	env := startTracedKfake(t, nil, tr)
	ps := applyPolicies(t, env, maxRequestRuleFor("max-64k", 64<<10))
	hog := dialRaw(t, env.addr)
	go hog.Write(wideProduce(42, "big", 100_000, 0)) // fails once kproxy closes
	expectClosed(t, hog, 5*time.Second)
	// The rule's close is counted after the sockets are closed.
	waitFor(t, 10*time.Second, "the close counted for its rule", func() bool {
		return ps.count(t, "kproxy_policy_closed_total", "max-64k") >= 1
	})
	if n := ps.count(t, "kproxy_policy_closed_total", "max-64k"); n != 1 {
		t.Fatalf("kproxy_policy_closed_total = %v, want 1", n)
	}
	s := oneRefusedSpan(t, flush(), "max-64k")
	wantAttrs(t, s, map[string]string{"kproxy.correlation_id.client": "42", "messaging.client.id": "hog",
		"error.type": "kproxy.policy_rejected"})
}

func maxRequestRuleFor(name string, limit int) policy.Rule {
	return policy.Rule{Name: name, Action: policy.ActionReject, Match: policy.Selector{APIs: []string{"Produce"}},
		Limits: policy.Limits{MaxRequestBytes: limit}}
}

// oneRefusedSpan returns the only Produce span, failing unless there is
// exactly one and it carries one reject event of rule, with a reason.
func oneRefusedSpan(t testing.TB, spans tracetest.SpanStubs, rule string) tracetest.SpanStub {
	t.Helper()
	var produce tracetest.SpanStubs
	for _, s := range spans {
		if attrMap(s)["kproxy.api_key"].Emit() == "0" {
			produce = append(produce, s)
		}
	}
	if len(produce) != 1 {
		t.Fatalf("%d produce spans, want one for the refused request", len(produce))
	}
	evs := policyEvents(produce, "0")
	if len(evs) != 1 || evs[0]["kproxy.policy.rule"] != rule || evs[0]["kproxy.policy.action"] != "reject" ||
		evs[0]["kproxy.policy.reason"] == "" {
		t.Fatalf("policy events %v, want one reject by %s with a reason", evs, rule)
	}
	return produce[0]
}
