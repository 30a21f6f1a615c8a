package correlate

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kproxy/kproxy/framing"
)

// popAll pops plain entries in order, as the response relay does, until
// stop is closed and nothing is left, or the table is closed. It returns
// how many it popped.
func popAll(t *testing.T, tb *Table, stop <-chan struct{}) int {
	frame := respFrame(0)
	popped := 0
	for {
		if tb.Len() == 0 {
			select {
			case <-stop:
				if tb.Len() == 0 {
					return popped
				}
			default:
			}
			continue
		}
		framing.SetResponseCorrelationID(frame, int32(popped))
		e, err := tb.Pop(frame)
		if errors.Is(err, ErrClosed) {
			return popped
		}
		if err != nil || e.ClientID != int32(popped) {
			t.Errorf("pop %d: %+v, %v", popped, e, err)
			return popped
		}
		popped++
	}
}

// racePushes pushes plain entries on one goroutine and pops them on
// another while act (Close or Drain) runs after round*100 looks at the
// table, as the relay's two directions would. The pusher stops at
// stopErr; a push that succeeds after act returned is an error. It
// returns how many pushes succeeded and how many entries were popped,
// and what act returned.
func racePushes[T any](t *testing.T, round int, tb *Table, stopErr error, act func() T) (pushed int64, popped int, got T) {
	t.Helper()
	var done atomic.Bool
	var n atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := int32(0); ; i++ {
			// Read before the push: a push that landed just before act
			// can return after it, and is then accounted for by act.
			after := done.Load()
			_, err := tb.Push(Entry{ClientID: i})
			switch {
			case err == nil:
				if after {
					t.Errorf("round %d: push %d succeeded after %v", round, i, stopErr)
					return
				}
				n.Add(1)
			case errors.Is(err, ErrFull):
				i--
			case errors.Is(err, stopErr):
				return
			default:
				t.Errorf("round %d: push %d: %v", round, i, err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		popped = popAll(t, tb, stop)
	}()
	for range round * 100 {
		tb.Len()
	}
	got = act()
	done.Store(true)
	close(stop)
	wg.Wait()
	return n.Load(), popped, got
}

// A Close racing pushes and pops on the lock-free path (while the ring
// grows) loses no entry: every push that succeeded was popped or is
// returned by Close, and no push succeeds after it. Run with -race.
func TestCloseRacingFastPathsLosesNothing(t *testing.T) {
	for round := range 50 {
		tb := New(512)
		pushed, popped, left := racePushes(t, round, tb, ErrClosed, tb.Close)
		if got := int64(popped + len(left)); got != pushed {
			t.Fatalf("round %d: %d pushed, %d popped + %d returned by Close", round, pushed, popped, len(left))
		}
		for i, e := range left {
			if e.ClientID != int32(popped+i) {
				t.Fatalf("round %d: Close returned client id %d at %d, want %d", round, e.ClientID, i, popped+i)
			}
		}
	}
}

// A Drain racing pushes on the lock-free path decides with them: every
// push that succeeded is answered before Drained, and none succeeds once
// Drain has returned.
func TestDrainRacingFastPushes(t *testing.T) {
	for round := range 50 {
		tb := New(64)
		pushed, popped, _ := racePushes(t, round, tb, ErrDraining, tb.Drain)
		if int64(popped) != pushed || !tb.Drained() {
			t.Fatalf("round %d: %d pushed, %d popped, drained %v", round, pushed, popped, tb.Drained())
		}
	}
}

// A Close racing a fast pop that wakes a waiter (the request side held
// back by a full table) never makes the pop signal a closed channel.
// Before the fix -race flagged it (send against close) within 500 rounds.
func TestCloseRacingFastPopWithAWaiter(t *testing.T) {
	for round := range 500 {
		tb := New(4)
		for i := range 4 {
			if _, err := tb.Push(Entry{ClientID: int32(i)}); err != nil {
				t.Fatal(err)
			}
		}
		waited := make(chan error, 1)
		go func() { waited <- tb.WaitRoom(time.Minute) }()
		for tb.waiters.Load() == 0 {
			runtime.Gosched()
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			frame := respFrame(0)
			for i := range 4 {
				framing.SetResponseCorrelationID(frame, int32(i))
				if _, err := tb.Pop(frame); err != nil {
					return // closed first
				}
			}
		}()
		go func() {
			defer wg.Done()
			tb.Close()
		}()
		wg.Wait()
		if err := <-waited; err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("round %d: WaitRoom: %v", round, err)
		}
	}
}
