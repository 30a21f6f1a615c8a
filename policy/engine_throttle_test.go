package policy

import (
	"testing"
	"time"
)

// bytesPerSecond is a throttle rule over n bytes a second for everyone.
func bytesPerSecond(name string, n float64) Rule {
	return Rule{Name: name, Action: ActionThrottle, Limits: Limits{BytesPerSecond: n}}
}

// The throttle delay is the bucket's debt, so it grows with every request
// sent while in debt, and shrinks as time passes.
func TestThrottleDelayGrowsWithDebt(t *testing.T) {
	e, _ := newEngine(t, bytesPerSecond("bytes", 1000))
	c := request(t, produce("orders"), "app-1")
	c.r.Bytes = 1000
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("within the burst: %+v, want Pass", v)
	}
	c.r.Bytes = 500
	steps := []struct {
		at   time.Duration
		want time.Duration
	}{{0, 500 * time.Millisecond}, {0, time.Second}, {0, 1500 * time.Millisecond}, {time.Second, time.Second}}
	for i, s := range steps {
		v := c.check(e, t0.Add(s.at))
		if v.Outcome != Throttle || v.Rule != "bytes" || v.Code != 0 || !near(v.Delay, s.want, tol) {
			t.Fatalf("step %d: %+v, want Throttle %v by bytes", i, v, s.want)
		}
	}
}

// A request far over the burst is relayed and throttled, never refused,
// and one throttle is capped at the broker's quota window (11 s): the rest
// of the debt is paid by later requests.
func TestThrottleHugeRequest(t *testing.T) {
	e, _ := newEngine(t, bytesPerSecond("bytes", 100))
	c := request(t, produce("orders"), "app-1")
	c.r.Bytes = 100_000
	if v := c.check(e, t0); v.Outcome != Throttle || v.Delay != 11*time.Second {
		t.Fatalf("verdict %+v, want Throttle capped at 11s", v)
	}
	c.r.Bytes = 1
	if v := c.check(e, t0.Add(time.Minute)); v.Outcome != Throttle || !near(v.Delay, 939*time.Second, tol) && v.Delay != 11*time.Second {
		t.Fatalf("a minute later: %+v, want still throttled by the debt", v)
	}
}

// A reject rate lets a request larger than the whole burst through from a
// full bucket (charging the debt), instead of refusing it forever.
func TestRejectRequestOverBurstOnce(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "slow", Action: ActionReject, Limits: Limits{RequestsPerSecond: 0.5}})
	c := request(t, produce("orders"), "app-1")
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("first request: %+v, want Pass", v)
	}
	if v := c.check(e, t0.Add(time.Second)); v.Outcome != Reject {
		t.Fatalf("second, 1 s later at 0.5/s: %+v, want Reject", v)
	}
	if v := c.check(e, t0.Add(3*time.Second)); v.Outcome != Pass {
		t.Fatalf("third, bucket full again: %+v, want Pass", v)
	}
}

// Of several throttle rules the longest delay wins, whatever their order.
func TestThrottleLongestWins(t *testing.T) {
	short := Rule{Name: "short", Action: ActionThrottle, Limits: Limits{RequestsPerSecond: 1}}
	long := bytesPerSecond("long", 100)
	for _, order := range [][]Rule{{short, long}, {long, short}} {
		e, m := newEngine(t, order...)
		c := request(t, produce("orders"), "app-1")
		c.r.Bytes = 100
		c.check(e, t0)
		c.r.Bytes = 300 // short: 1s, long: 3s
		v := c.check(e, t0)
		if v.Outcome != Throttle || v.Rule != "long" || !near(v.Delay, 3*time.Second, tol) {
			t.Fatalf("order %s,%s: %+v, want Throttle 3s by long", order[0].Name, order[1].Name, v)
		}
		if s, l := count(m.throttled, "short"), count(m.throttled, "long"); s != 0 || l != 1 {
			t.Fatalf("throttled counters short %v long %v, want 0 and 1", s, l)
		}
	}
}

// The first rule that refuses decides: later rules are not even matched,
// and a throttle found before it is dropped.
func TestFirstRejectWins(t *testing.T) {
	e, m := newEngine(t,
		Rule{Name: "slow", Action: ActionThrottle, Limits: Limits{BytesPerSecond: 1}},
		deny("first", Selector{APIs: []string{"Produce"}}),
		deny("second", Selector{}),
	)
	v := request(t, produce("orders"), "app-1").check(e, t0)
	if v.Outcome != Reject || v.Rule != "first" || v.Delay != 0 {
		t.Fatalf("verdict %+v, want Reject by first", v)
	}
	if got := count(m.matched, "second"); got != 0 {
		t.Fatalf("second rule matched %v times, want 0: evaluation stops at a refusal", got)
	}
	if got := count(m.throttled, "slow"); got != 0 {
		t.Fatalf("slow rule throttled %v, want 0", got)
	}
}

// Log rules never change the verdict; they count what they would have
// done in kproxy_policy_logged_total.
func TestLogRulesOnlyCount(t *testing.T) {
	logAll := Rule{Name: "log-all", Action: ActionLog}
	logRate := Rule{Name: "log-rate", Action: ActionLog, Limits: Limits{RequestsPerSecond: 1}}
	cases := []struct {
		name  string
		rules []Rule
		want  Outcome
	}{
		{"alone", []Rule{logAll, logRate}, Pass},
		{"before a refusal", []Rule{logAll, logRate, deny("no", Selector{})}, Reject},
		{"before a throttle", []Rule{logAll, logRate, bytesPerSecond("slow", 1)}, Throttle},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, m := newEngine(t, c.rules...)
			call := request(t, produce("orders"), "app-1")
			for i := 0; i < 3; i++ {
				if v := call.check(e, t0); v.Outcome != c.want || v.Rule == "log-all" || v.Rule == "log-rate" {
					t.Fatalf("request %d: %+v, want outcome %d not decided by a log rule", i, v, c.want)
				}
			}
			// log-all acts on all three; log-rate on the two over 1/s.
			if a, r := count(m.logged, "log-all"), count(m.logged, "log-rate"); a != 3 || r != 2 {
				t.Fatalf("logged log-all %v log-rate %v, want 3 and 2", a, r)
			}
		})
	}
}

// A request over a log rule's max_request_bytes is seen first by
// CheckOversize (from its header) and then, unless refused there, by Check:
// each rule it matches counts it once either way.
func TestOversizeRequestsCountOnce(t *testing.T) {
	logBig := Rule{Name: "log-big", Action: ActionLog, Limits: Limits{MaxRequestBytes: 64}}
	denyBig := Rule{Name: "deny-big", Action: ActionReject, Limits: Limits{MaxRequestBytes: 64}}
	for _, c := range []struct {
		name   string
		rules  []Rule
		want   Outcome
		denied float64
	}{
		{"log only", []Rule{logBig}, Pass, 0},
		{"log then refuse", []Rule{logBig, denyBig}, Reject, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, m := newEngine(t, c.rules...)
			call := request(t, produce("orders", "payments", "audit"), "app-1")
			if call.r.Bytes <= 64 {
				t.Fatalf("test request is %d bytes, want over 64", call.r.Bytes)
			}
			v := e.CheckOversize(call.r)
			if v.Outcome == Pass {
				v = call.check(e, t0) // the relay's normal path
			}
			if v.Outcome != c.want {
				t.Fatalf("outcome %d, want %d", v.Outcome, c.want)
			}
			if got, logged := count(m.matched, "log-big"), count(m.logged, "log-big"); got != 1 || logged != 1 {
				t.Fatalf("log-big matched %v and logged %v times, want 1 and 1", got, logged)
			}
			if got := count(m.rejected, "deny-big"); got != c.denied {
				t.Fatalf("deny-big rejected %v, want %v", got, c.denied)
			}
		})
	}
}
