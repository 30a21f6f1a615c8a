package policy

import (
	"strconv"
	"testing"
	"time"
)

// A client that rotates its client id through more ids than a rule keeps
// buckets for does not wipe the debt of a client that stays: the throttle
// it earned is still there after, and the rule's keys stay bounded.
func TestKeyRotationKeepsOthersDebt(t *testing.T) {
	e, _ := newEngine(t, keyed("client_id"))
	victim := request(t, produce("orders"), "steady")
	for i := 0; i < 20; i++ {
		victim.check(e, t0) // one request a second: 19 s of debt
	}
	rotating := request(t, produce("orders"), "")
	for i := 0; i < 2*maxKeyedMeters+1000; i++ {
		rotating.r.ClientID = "rot-" + strconv.Itoa(i)
		if v := rotating.check(e, t0); v.Outcome != Pass {
			t.Fatalf("id %d, first request: %+v, want Pass", i, v)
		}
	}
	if v := victim.check(e, t0); v.Outcome != Throttle || v.Delay != maxThrottle {
		t.Fatalf("steady client after %d other ids: %+v, want Throttle %v (its debt kept)", 2*maxKeyedMeters+1000, v, maxThrottle)
	}
	if n := len(e.rules[0].byKey.byKey); n > maxKeyedMeters {
		t.Fatalf("%d keys, want at most %d", n, maxKeyedMeters)
	}
}

// The same for topic keys, which producers choose too.
func TestKeyRotationKeepsTopicDebt(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "r", Action: ActionThrottle, Limits: Limits{BytesPerSecond: 10, Key: "topic"}})
	ru := e.rules[0]
	charge := func(topic string, n float64) *meter {
		m := ru.topicMeter(topic, t0)
		m.mu.Lock()
		defer m.mu.Unlock()
		m.b[1].take(n, t0)
		return m
	}
	hot := charge("hot", 1000) // 99 s of debt
	for i := 0; i < 2*maxKeyedMeters; i++ {
		charge("t-"+strconv.Itoa(i), 1)
	}
	if ru.topicMeter("hot", t0) != hot {
		t.Fatal("the topic in debt was dropped for topics that owe next to nothing")
	}
	if n := len(ru.byKey.byKey); n > maxKeyedMeters {
		t.Fatalf("%d keys, want at most %d", n, maxKeyedMeters)
	}
}

// meters is a small keyedMeters whose keys each have one bucket of 10
// tokens a second, charged n tokens at t0.
func meters(t *testing.T, max int, charges ...any) *keyedMeters {
	t.Helper()
	k := newKeyedMeters(max)
	for i := 0; i < len(charges); i += 2 {
		take(k, charges[i].(string), float64(charges[i+1].(int)), t0)
	}
	return k
}

// take charges key n tokens at now, as a request does.
func take(k *keyedMeters, key string, n float64, now time.Time) {
	m, fresh := k.get(key, now)
	if fresh {
		m.b[1] = newBucket(10, now)
	}
	m.b[1].take(n, now)
}

func keysOf(k *keyedMeters) map[string]bool {
	s := map[string]bool{}
	for key := range k.byKey {
		s[key] = true
	}
	return s
}

// Past the bound, a new key drops the least recently used key whose
// bucket is full again, not an older one still in debt.
func TestKeyedMetersDropFullFirst(t *testing.T) {
	k := meters(t, 3, "debtor", 100, "a", 1, "b", 1) // debtor: 9 s to full; a, b: 0.1 s
	later := t0.Add(time.Second)
	take(k, "c", 1, later)
	if got := keysOf(k); !got["debtor"] || got["a"] || !got["b"] || !got["c"] {
		t.Fatalf("keys %v, want debtor, b and c (a: full and least recently used)", got)
	}
	take(k, "d", 1, later)
	if got := keysOf(k); !got["debtor"] || got["b"] || !got["c"] || !got["d"] {
		t.Fatalf("keys %v, want debtor, c and d", got)
	}
}

// When every key looked at owes tokens, the one closest to full goes:
// the smallest debt is forgiven, whatever the order of use.
func TestKeyedMetersDropSmallestDebt(t *testing.T) {
	k := meters(t, 3, "big", 100, "small", 20, "mid", 50)
	take(k, "new", 30, t0)
	if got := keysOf(k); !got["big"] || got["small"] || !got["mid"] || !got["new"] {
		t.Fatalf("keys %v, want big, mid and new (small: closest to full)", got)
	}
	take(k, "newer", 10, t0)
	if got := keysOf(k); !got["big"] || !got["mid"] || got["new"] || !got["newer"] {
		t.Fatalf("keys %v, want big, mid and newer", got)
	}
}

// Keys kept in the order of use: using a key makes it the last to go.
func TestKeyedMetersUseKeepsKey(t *testing.T) {
	k := meters(t, 2, "a", 1, "b", 1)
	later := t0.Add(time.Second) // both full
	take(k, "a", 1, later)
	take(k, "c", 1, later)
	if got := keysOf(k); !got["a"] || got["b"] || !got["c"] {
		t.Fatalf("keys %v, want a and c (b least recently used)", got)
	}
}

// A request whose client id already has a bucket allocates nothing.
func TestKeyLookupDoesNotAllocate(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "r", Action: ActionThrottle, Limits: Limits{RequestsPerSecond: 1e12}})
	calls := []call{request(t, produce("orders"), "app-1"), request(t, produce("orders"), "app-2")}
	for _, c := range calls {
		c.check(e, t0)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		calls[i&1].check(e, t0)
		i++
	}); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}
