package core

import (
	"sync"
	"testing"
)

// Every move is one of the diagram's: opening to relaying to draining,
// and any state but closed to closed, once.
func TestLifecycleMoves(t *testing.T) {
	var l lifecycle
	if l.load() != StateOpening || l.drain() {
		t.Fatal("an opening connection drained before it was registered")
	}
	if !l.relay() || l.relay() || l.load() != StateRelaying {
		t.Fatal("opening did not move to relaying exactly once")
	}
	if !l.drain() || l.drain() || l.load() != StateDraining {
		t.Fatal("relaying did not move to draining exactly once")
	}
	if !l.close() || l.close() || l.load() != StateClosed {
		t.Fatal("draining did not move to closed exactly once")
	}
	if l.relay() || l.drain() {
		t.Fatal("a closed connection moved on")
	}
	var o lifecycle // opening straight to closed: a refused registration
	if !o.close() || o.load() != StateClosed {
		t.Fatal("an opening connection could not close")
	}
}

// Of many goroutines racing to close, one does.
func TestLifecycleClosesOnce(t *testing.T) {
	var l lifecycle
	l.relay()
	var wg sync.WaitGroup
	var mu sync.Mutex
	closed := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.close() {
				mu.Lock()
				closed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if closed != 1 {
		t.Fatalf("%d closes, want 1", closed)
	}
}

// The budget never passes its bound, not even for an instant, and gives
// back what it took.
func TestBudgetBound(t *testing.T) {
	b := Budget{max: 1000}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if b.Take(300) {
					if u := b.Used(); u > b.Max() {
						t.Errorf("used %d over max %d", u, b.Max())
					}
					b.Take(-300)
				}
			}
		}()
	}
	wg.Wait()
	if b.Used() != 0 {
		t.Fatalf("%d left charged", b.Used())
	}
	if !b.Take(1000) || b.Take(1) {
		t.Fatal("the bound is not exactly max")
	}
}
