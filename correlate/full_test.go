package correlate

import (
	"errors"
	"testing"
	"time"
)

// fill pushes until the table is full and returns the ids given.
func fill(t *testing.T, tb *Table, n int) []int32 {
	t.Helper()
	var ids []int32
	for i := 0; i < n; i++ {
		id, err := tb.Push(Entry{ClientID: int32(i)})
		if err != nil {
			t.Fatalf("push %d of %d: %v", i, n, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestPushFull checks MaxInFlight is a hard bound that Push reports instead
// of blocking, and that one pop makes room for exactly one push.
func TestPushFull(t *testing.T) {
	tb := New(3)
	ids := fill(t, tb, 3)
	if _, err := tb.Push(Entry{}); !errors.Is(err, ErrFull) {
		t.Fatalf("4th push: %v", err)
	}
	if tb.Len() != 3 {
		t.Fatalf("Len %d", tb.Len())
	}
	if _, err := tb.Pop(respFrame(ids[0])); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Push(Entry{}); err != nil {
		t.Fatalf("push after a pop: %v", err)
	}
	if _, err := tb.Push(Entry{}); !errors.Is(err, ErrFull) {
		t.Fatalf("push past the bound again: %v", err)
	}
}

// TestWaitRoomTimesOut checks a full table nobody drains gives ErrFull after
// d, so the caller can check its own bounds. A token left by an earlier pop
// must not count as room.
func TestWaitRoomTimesOut(t *testing.T) {
	tb := New(2)
	ids := fill(t, tb, 1)
	if _, err := tb.Pop(respFrame(ids[0])); err != nil { // leaves a token
		t.Fatal(err)
	}
	fill(t, tb, 2)
	const d = 50 * time.Millisecond
	start := time.Now()
	if err := tb.WaitRoom(d); !errors.Is(err, ErrFull) {
		t.Fatalf("WaitRoom: %v, want ErrFull", err)
	}
	if el := time.Since(start); el < d {
		t.Fatalf("returned after %v, before %v", el, d)
	}
}

// TestWaitRoomNotFull returns at once when there is room, even with d 0.
func TestWaitRoomNotFull(t *testing.T) {
	tb := New(2)
	fill(t, tb, 1)
	if err := tb.WaitRoom(0); err != nil {
		t.Fatal(err)
	}
}

// TestWaitRoomWakesOnPop checks a pop from the response side wakes a
// waiting request side long before its timeout.
func TestWaitRoomWakesOnPop(t *testing.T) {
	tb := New(2)
	ids := fill(t, tb, 2)
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = tb.Pop(respFrame(ids[0]))
	}()
	start := time.Now()
	if err := tb.WaitRoom(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("woke after %v", el)
	}
	if tb.Len() != 1 {
		t.Fatalf("Len %d: returned without room", tb.Len())
	}
}

// TestWaitRoomWakesOnClose checks Close releases a waiter with ErrClosed, so
// a paused client goroutine ends with its pair.
func TestWaitRoomWakesOnClose(t *testing.T) {
	tb := New(1)
	fill(t, tb, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		tb.Close()
	}()
	start := time.Now()
	if err := tb.WaitRoom(10 * time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitRoom: %v, want ErrClosed", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("woke after %v", el)
	}
	if err := tb.WaitRoom(time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitRoom after Close: %v", err)
	}
}

// TestCloseWakesEveryWaiter checks Close releases all waiters, not only the
// one a pop token would reach.
func TestCloseWakesEveryWaiter(t *testing.T) {
	tb := New(1)
	fill(t, tb, 1)
	errs := make(chan error, 3)
	for i := 0; i < cap(errs); i++ {
		go func() { errs <- tb.WaitRoom(5 * time.Second) }()
	}
	time.Sleep(20 * time.Millisecond) // let them block
	tb.Close()
	deadline := time.After(2 * time.Second)
	for i := 0; i < cap(errs); i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("waiter %d: %v", i, err)
			}
		case <-deadline:
			t.Fatalf("waiter %d still blocked after Close", i)
		}
	}
}
