package harness

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
)

// Dials records the addresses a client dialled, to prove that a client
// stayed behind kproxy: a broker that advertised its own address would
// let the client bypass kproxy after its first request.
type Dials struct {
	mu    sync.Mutex
	addrs []string
	d     net.Dialer
}

// DialContext dials and records addr; it fits kgo.Dialer and most
// clients' dial hooks.
func (d *Dials) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	return d.d.DialContext(ctx, network, addr)
}

// RequireOnly fails the test unless every dial went to addr, and there
// was at least one.
func (d *Dials) RequireOnly(t testing.TB, addr string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.addrs) == 0 {
		t.Fatalf("the client dialled nothing")
	}
	for _, a := range d.addrs {
		if a != addr {
			t.Fatalf("the client dialled %s besides kproxy at %s (all dials: %v): traffic bypassed kproxy", a, addr, slices.Compact(slices.Sorted(slices.Values(d.addrs))))
		}
	}
}

// RequireAmong fails the test unless every dial went to one of addrs,
// and there was at least one.
func (d *Dials) RequireAmong(t testing.TB, addrs []string) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.addrs) == 0 {
		t.Fatalf("the client dialled nothing")
	}
	for _, a := range d.addrs {
		if !slices.Contains(addrs, a) {
			t.Fatalf("the client dialled %s, not one of kproxy's %v (all dials: %v): traffic bypassed kproxy", a, addrs, slices.Compact(slices.Sorted(slices.Values(d.addrs))))
		}
	}
}

// Addrs are the distinct addresses dialled, sorted.
func (d *Dials) Addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Compact(slices.Sorted(slices.Values(d.addrs)))
}
