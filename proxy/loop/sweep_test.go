package loop

import (
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/kproxy/kproxy/proxy/core"
)

// TestWaitingPairsStayListedWhileTheyWait: the overflow sweep only checks
// the pairs on its list, so a pair must be on it for as long as one of its
// relays waits, however the sweeps and the waits interleave, and must leave
// it once nothing waits (an idle pair costs the sweep nothing).
func TestWaitingPairsStayListedWhileTheyWait(t *testing.T) {
	s := newTestDriver(t, 1<<30)
	listed := func(p *pair) bool {
		s.waitMu.Lock()
		defer s.waitMu.Unlock()
		return slices.Contains(s.waiting, p)
	}
	pairs := make([]*pair, 4)
	for i := range pairs {
		pairs[i], _, _ = lenPair(t, s)
		pairs[i].c.Close(core.ReasonClientClosed, nil) // the sweep reads no connection of a closed pair
	}

	p := pairs[0]
	p.waitStart()
	if s.sweepWaiting(nil); !listed(p) {
		t.Fatal("a waiting pair left the list")
	}
	p.waitEnd()
	for range keepIdleSweeps - 1 {
		if s.sweepWaiting(nil); !listed(p) {
			t.Fatal("a pair that waited lately left the list early")
		}
	}
	if s.sweepWaiting(nil); listed(p) || p.swept.Load() {
		t.Fatalf("a pair that has not waited for %d sweeps stayed on the list", keepIdleSweeps)
	}

	stop := make(chan struct{})
	var sweeps sync.WaitGroup
	sweeps.Add(1)
	go func() {
		defer sweeps.Done()
		for {
			select {
			case <-stop:
				return
			default:
				s.sweepWaiting(nil)
				runtime.Gosched()
			}
		}
	}()
	var wg sync.WaitGroup
	for _, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20000 {
				p.waitStart()
				if !listed(p) {
					t.Errorf("wait %d: the pair is waiting but not on the sweep's list", i)
					p.waitEnd()
					return
				}
				p.waitEnd()
				// Idle for a while, so that sweeps reach keepIdleSweeps
				// and drop pairs just as their next wait starts.
				for range i % 64 {
					runtime.Gosched()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sweeps.Wait()
	for range keepIdleSweeps {
		s.sweepWaiting(nil)
	}
	if len(s.waiting) != 0 {
		t.Fatalf("%d pairs listed after every wait ended", len(s.waiting))
	}
}
