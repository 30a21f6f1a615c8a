package sasl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// At most max_concurrent_logins run at once: one more waits for a slot,
// and gives up when its context ends.
func TestLoginGateConcurrency(t *testing.T) {
	g := newLoginGate(Upstream{MaxConcurrentLogins: 2, MaxLoginsPerSecond: 1000}, nil, zerolog.Nop())
	a, err := g.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.enter(ctx); err == nil {
		t.Fatal("a third login ran beside two under max_concurrent_logins 2")
	}
	a()
	if _, err := g.enter(context.Background()); err != nil {
		t.Fatalf("a slot given back was not taken: %v", err)
	}
}

// Past max_logins_per_second a login waits; one whose deadline comes
// first is refused.
func TestLoginGateRate(t *testing.T) {
	g := newLoginGate(Upstream{MaxConcurrentLogins: 100, MaxLoginsPerSecond: 1}, nil, zerolog.Nop())
	leave, err := g.enter(context.Background()) // the burst of one
	if err != nil {
		t.Fatal(err)
	}
	leave()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := g.enter(ctx); err == nil {
		t.Fatal("a second login within a second ran at max_logins_per_second 1")
	}
}

// After failuresBeforeBackoff failures in a row new clients are refused
// at once, in a window that widens with each later failure up to
// backoffMax; a login that works ends it.
func TestLoginGateBackoff(t *testing.T) {
	g := newLoginGate(Upstream{}, nil, zerolog.Nop())
	fail := errors.New("refused")
	for range failuresBeforeBackoff - 1 {
		g.done(fail)
	}
	if err := g.admit(); err != nil {
		t.Fatalf("refused after %d failures: %v", failuresBeforeBackoff-1, err)
	}
	g.done(fail)
	if err := g.admit(); !errors.Is(err, ErrBackoff) {
		t.Fatalf("admitted after %d failures in a row: %v", failuresBeforeBackoff, err)
	}
	for range 10 {
		g.done(fail)
	}
	if g.window != backoffMax {
		t.Fatalf("window %v after many failures, want %v", g.window, backoffMax)
	}
	g.done(nil)
	if err := g.admit(); err != nil {
		t.Fatalf("refused after a login worked: %v", err)
	}
}
