package policy

import (
	"sync"
	"testing"
	"time"
)

// keyed is a throttle rule at one request a second, counted by key.
func keyed(key string) Rule {
	return Rule{Name: "r", Action: ActionThrottle, Limits: Limits{RequestsPerSecond: 1, Key: key}}
}

// Each client id has its own bucket by default.
func TestKeyClientID(t *testing.T) {
	for _, key := range []string{"", "client_id"} {
		e, _ := newEngine(t, keyed(key))
		a1 := request(t, produce("orders"), "app-1")
		a1again := request(t, produce("orders"), "app-1") // another connection, same client
		a2 := request(t, produce("orders"), "app-2")
		if v := a1.check(e, t0); v.Outcome != Pass {
			t.Fatalf("key %q: app-1 first: %+v", key, v)
		}
		if v := a1again.check(e, t0); v.Outcome != Throttle {
			t.Fatalf("key %q: app-1 second, other connection: %+v, want Throttle", key, v)
		}
		if v := a2.check(e, t0); v.Outcome != Pass {
			t.Fatalf("key %q: app-2 first: %+v, want Pass (own bucket)", key, v)
		}
	}
}

// Keyed by connection, each ConnState has its own bucket, even for one
// client id.
func TestKeyConnection(t *testing.T) {
	e, _ := newEngine(t, keyed("connection"))
	c1 := request(t, produce("orders"), "app-1")
	c2 := request(t, produce("orders"), "app-1")
	if c1.r.Conn == c2.r.Conn {
		t.Fatal("test needs two connections")
	}
	if v := c1.check(e, t0); v.Outcome != Pass {
		t.Fatalf("conn 1 first: %+v", v)
	}
	if v := c2.check(e, t0); v.Outcome != Pass {
		t.Fatalf("conn 2 first: %+v, want Pass (own bucket)", v)
	}
	if v := c1.check(e, t0); v.Outcome != Throttle {
		t.Fatalf("conn 1 second: %+v, want Throttle", v)
	}
}

// Keyed by rule, all matching traffic shares one bucket.
func TestKeyRule(t *testing.T) {
	e, _ := newEngine(t, keyed("rule"))
	if v := request(t, produce("orders"), "app-1").check(e, t0); v.Outcome != Pass {
		t.Fatalf("app-1: %+v", v)
	}
	if v := request(t, produce("orders"), "app-2").check(e, t0); v.Outcome != Throttle || !near(v.Delay, time.Second, tol) {
		t.Fatalf("app-2 after app-1: %+v, want Throttle 1s (shared bucket)", v)
	}
}

// Buckets stand concurrent use (run with -race): 100 requests from many
// goroutines at one instant leave exactly 99 seconds of debt, which the
// bucket keeps even though one throttle is capped at 11 s.
func TestKeyConcurrent(t *testing.T) {
	for _, key := range []string{"client_id", "connection", "rule"} {
		e, _ := newEngine(t, keyed(key))
		c := request(t, produce("orders"), "app-1")
		var wg sync.WaitGroup
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 10; j++ {
					c.check(e, t0) // the body is decoded by no rule here
				}
			}()
		}
		wg.Wait()
		if v := c.check(e, t0.Add(90*time.Second)); !near(v.Delay, 10*time.Second, tol) {
			t.Fatalf("key %s: 90 s after 100 requests at 1/s: %+v, want Throttle 10s", key, v)
		}
	}
}
