package policy

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// perSecond is a rule over n requests a second for the listed APIs.
func perSecond(name, action string, n float64, apis ...string) Rule {
	return Rule{Name: name, Action: action, Match: Selector{APIs: apis}, Limits: Limits{RequestsPerSecond: n}}
}

// Over a rate, Produce is refused with POLICY_VIOLATION; the refused
// requests cost nothing, so the client is back once the bucket refills.
func TestRateRejectProduce(t *testing.T) {
	e, m := newEngine(t, perSecond("produce-rate", ActionReject, 1, "Produce"))
	c := request(t, produce("orders"), "app-1")
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("first request: %+v, want Pass", v)
	}
	for i := 0; i < 5; i++ {
		v := c.check(e, t0.Add(time.Duration(i)*time.Millisecond))
		if v.Outcome != Reject || v.Code != 44 || v.Rule != "produce-rate" {
			t.Fatalf("request %d over the rate: %+v, want Reject 44", i, v)
		}
	}
	// Had the refusals taken tokens, the bucket would still be 5 in debt.
	if v := c.check(e, t0.Add(time.Second)); v.Outcome != Pass {
		t.Fatalf("a second later: %+v, want Pass", v)
	}
	if got := count(m.rejected, "produce-rate"); got != 5 {
		t.Fatalf("rejected counter %v, want 5", got)
	}
}

// Topic and partition creation over a rate get THROTTLING_QUOTA_EXCEEDED,
// the broker's own answer to a creation quota (KIP-599).
func TestRateRejectCreationAPIs(t *testing.T) {
	create := versioned(kmsg.NewPtrCreateTopicsRequest(), 6)
	create.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "t", NumPartitions: 1, ReplicationFactor: 1}}
	del := versioned(kmsg.NewPtrDeleteTopicsRequest(), 5)
	del.TopicNames = []string{"t"}
	parts := versioned(kmsg.NewPtrCreatePartitionsRequest(), 3)
	parts.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "t", Count: 2}}
	for _, req := range []kmsg.Request{create, del, parts, metadata("t")} {
		name := kmsg.NameForKey(req.Key())
		t.Run(name, func(t *testing.T) {
			e, _ := newEngine(t, perSecond("admin-rate", ActionReject, 1))
			c := request(t, req, "admin")
			c.check(e, t0)
			want := int16(89)
			if req.Key() == 3 { // Metadata: not a creation API
				want = 44
			}
			if v := c.check(e, t0); v.Outcome != Reject || v.Code != want {
				t.Fatalf("verdict %+v, want Reject %d", v, want)
			}
		})
	}
}

// A rule with both rates refuses on either, and a refusal takes tokens
// from neither bucket: oversized requests refused on bytes must not use up
// the request rate of the small requests after them.
func TestRateRejectTakesNoTokensFromEitherBucket(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "r", Action: ActionReject, Limits: Limits{RequestsPerSecond: 2, BytesPerSecond: 1000}})
	c := request(t, produce("orders"), "app-1")
	big := *c.r
	big.Bytes = 5000
	// Not in debt: the first big request goes, and puts bytes in debt.
	if v := e.Check(&big, c.body, t0); v.Outcome != Pass {
		t.Fatalf("first big request: %+v, want Pass", v)
	}
	m := &e.rules[0].byKey.byKey["app-1"].meter
	reqTokens, byteTokens := m.b[0].tokens, m.b[1].tokens
	for i := 0; i < 3; i++ {
		if v := e.Check(&big, c.body, t0); v.Outcome != Reject || v.Code != 44 {
			t.Fatalf("big request %d in debt: %+v, want Reject 44", i, v)
		}
	}
	if m.b[0].tokens != reqTokens || m.b[1].tokens != byteTokens {
		t.Fatalf("refusals took tokens: requests %v -> %v, bytes %v -> %v",
			reqTokens, m.b[0].tokens, byteTokens, m.b[1].tokens)
	}
}

// Fetch over a reject rate is throttled instead: a Java consumer fails on
// POLICY_VIOLATION. A throttled Fetch is relayed, so it is charged: the
// delay grows like any throttle's.
func TestRateRejectFetchIsThrottled(t *testing.T) {
	e, m := newEngine(t, perSecond("fetch-rate", ActionReject, 1))
	c := request(t, fetch("orders"), "app-1")
	c.check(e, t0)
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		v := c.check(e, t0)
		if v.Outcome != Throttle || v.Code != 0 || v.Rule != "fetch-rate" || !near(v.Delay, want, tol) {
			t.Fatalf("fetch %d over the rate: %+v, want Throttle for %v by fetch-rate", i, v, want)
		}
	}
	if r, th := count(m.rejected, "fetch-rate"), count(m.throttled, "fetch-rate"); r != 0 || th != 3 {
		t.Fatalf("rejected %v throttled %v, want 0 and 3", r, th)
	}
}

// heartbeats are the exempt APIs of every kind of group: classic,
// KIP-848 consumer, share and streams.
func heartbeats() []kmsg.Request {
	return []kmsg.Request{versioned(kmsg.NewPtrHeartbeatRequest(), 4), versioned(kmsg.NewPtrConsumerGroupHeartbeatRequest(), 0),
		versioned(kmsg.NewPtrShareGroupHeartbeatRequest(), 1), versioned(kmsg.NewPtrStreamsGroupHeartbeatRequest(), 0)}
}

// Heartbeats are never throttled or refused by a rate up to their
// ceiling: a late heartbeat costs the consumer its group membership.
func TestRateExemptHeartbeats(t *testing.T) {
	beats := heartbeats()
	for _, action := range []string{ActionReject, ActionThrottle} {
		for _, beat := range beats {
			e, m := newEngine(t, perSecond("r", action, 1), Rule{Name: "b", Action: action, Limits: Limits{BytesPerSecond: 1}})
			c := request(t, beat, "app-1")
			for i := 0; i < 10; i++ {
				if v := c.check(e, t0); v.Outcome != Pass {
					t.Fatalf("%s under a %s rule, beat %d: %+v, want Pass", kmsg.NameForKey(beat.Key()), action, i, v)
				}
			}
			if r, th := count(m.rejected, "r"), count(m.throttled, "r"); r != 0 || th != 0 {
				t.Fatalf("rejected %v throttled %v, want none", r, th)
			}
		}
	}
}

// Exempt heartbeats take no tokens from the rate they share with the
// client's other requests: a burst of heartbeats costs the next Produce
// nothing.
func TestRateHeartbeatsTakeNoTokens(t *testing.T) {
	e, _ := newEngine(t, perSecond("r", ActionThrottle, 1))
	beat := request(t, versioned(kmsg.NewPtrHeartbeatRequest(), 4), "app-1")
	for i := 0; i < 3; i++ {
		beat.check(e, t0)
	}
	v := request(t, produce("orders"), "app-1").check(e, t0)
	if v.Outcome != Pass {
		t.Fatalf("produce after 3 heartbeats at 1/s: %+v, want Pass", v)
	}
}

// Exempt APIs have a ceiling of exemptCeiling times the rule's request
// rate: past it the connection is closed, whatever the action, so a
// client cannot send its load as heartbeats (issue 27, item 10). Under a
// 2/s rule 20 go at once, the 21st closes; a member beating every few
// seconds never comes near it.
func TestRateHeartbeatCeilingCloses(t *testing.T) {
	for _, action := range []string{ActionReject, ActionThrottle} {
		for _, beat := range heartbeats() {
			name := kmsg.NameForKey(beat.Key())
			e, m := newEngine(t, perSecond("r", action, 2))
			c := request(t, beat, "app-1")
			for i := 0; i < exemptCeiling*2; i++ {
				if v := c.check(e, t0); v.Outcome != Pass {
					t.Fatalf("%s %s beat %d of a burst within the ceiling: %+v", action, name, i, v)
				}
			}
			v := c.check(e, t0)
			if v.Outcome != Close || v.Rule != "r" {
				t.Fatalf("%s %s beat past the ceiling: %+v, want Close by r", action, name, v)
			}
			if r := count(m.rejected, "r"); r != 0 {
				t.Fatalf("a close counted %v rejections", r)
			}
			// A member beating every 3 s is never near it.
			e, _ = newEngine(t, perSecond("r", action, 0.1))
			c = request(t, beat, "app-1")
			for i := 0; i < 100; i++ {
				if v := c.check(e, t0.Add(time.Duration(i)*3*time.Second)); v.Outcome != Pass {
					t.Fatalf("%s %s beat %d every 3s under 0.1/s: %+v", action, name, i, v)
				}
			}
		}
	}
	// A log rule only counts.
	e, m := newEngine(t, perSecond("r", ActionLog, 1))
	c := request(t, heartbeats()[1], "app-1")
	for i := 0; i < 50; i++ {
		if v := c.check(e, t0); v.Outcome != Pass {
			t.Fatalf("under a log rule beat %d: %+v", i, v)
		}
	}
	if count(m.logged, "r") == 0 {
		t.Fatal("beats past the ceiling of a log rule were not logged")
	}
}

// The ceiling is the connection's, whatever the rule's key: members that
// share a client id each heartbeat at their own pace (a review found a
// shared ceiling closing fifty pods named "sarama" under a 1/s rule).
func TestRateHeartbeatCeilingPerConnection(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "r", Action: ActionReject, Limits: Limits{RequestsPerSecond: 1, Key: "client_id"}})
	for pod := range 50 {
		c := request(t, versioned(kmsg.NewPtrHeartbeatRequest(), 4), "sarama") // a connection of its own
		for beat := range 3 {
			if v := c.check(e, t0.Add(time.Duration(beat)*3*time.Second)); v.Outcome != Pass {
				t.Fatalf("pod %d beat %d: %+v", pod, beat, v)
			}
		}
	}
}
