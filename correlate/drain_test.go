package correlate

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestDrainRefusesPush checks Push fails with ErrDraining once Drain was
// called, that Drain says whether entries were left, and that Drained
// follows the last pop.
func TestDrainRefusesPush(t *testing.T) {
	tb := New(4)
	id, _ := tb.Push(Entry{ClientID: 1})
	if tb.Drain() {
		t.Fatal("Drain reported empty with an entry in flight")
	}
	if _, err := tb.Push(Entry{ClientID: 2}); !errors.Is(err, ErrDraining) {
		t.Fatalf("Push while draining: %v, want ErrDraining", err)
	}
	if tb.Drained() {
		t.Fatal("Drained with an entry in flight")
	}
	if _, err := tb.Pop(respFrame(id)); err != nil {
		t.Fatalf("a response still owed while draining: %v", err)
	}
	if !tb.Drained() {
		t.Fatal("not Drained after the last pop")
	}
	if New(1).Drained() {
		t.Fatal("Drained without Drain")
	}
}

// TestDrainRacesPush runs Drain against a goroutine pushing as fast as it
// can, many times: every push that succeeded must be one Drain counted
// (Drain never reports empty while an entry it let in is in the table,
// and none gets in after), the invariant the proxy's drain relies on to
// close only when every request sent has its response.
func TestDrainRacesPush(t *testing.T) {
	for round := 0; round < 400; round++ {
		tb := New(64)
		var pushed int
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := tb.Push(Entry{})
				if errors.Is(err, ErrFull) {
					continue // until Drain
				}
				if err != nil {
					if !errors.Is(err, ErrDraining) {
						t.Errorf("Push: %v", err)
					}
					return
				}
				pushed++
			}
		}()
		for range round % 8 {
			runtime.Gosched() // Drain before, during and after the first pushes
		}
		empty := tb.Drain()
		wg.Wait()
		if empty != (pushed == 0) {
			t.Fatalf("round %d: Drain reported empty=%v, but %d pushes succeeded", round, empty, pushed)
		}
		if tb.Len() != pushed {
			t.Fatalf("round %d: %d entries, %d pushes succeeded", round, tb.Len(), pushed)
		}
	}
}

// TestWaitEmpty: a connection about to re-authenticate waits until every
// request it sent is answered, and kproxy's own entry goes through the
// table like any other.
func TestWaitEmpty(t *testing.T) {
	tb := New(4)
	if err := tb.WaitEmpty(time.Millisecond); err != nil {
		t.Fatalf("empty table: %v", err)
	}
	id, _ := tb.Push(Entry{Kind: Forwarded, APIKey: 1})
	if err := tb.WaitEmpty(time.Millisecond); err != ErrBusy {
		t.Fatalf("with one in flight: %v, want ErrBusy", err)
	}
	done := make(chan error, 1)
	go func() { done <- tb.WaitEmpty(time.Minute) }()
	if _, err := tb.Pop(respFrame(id)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after the answer: %v", err)
	}
	reply := make(chan []byte, 1)
	own, _ := tb.Push(Entry{Kind: Own, APIKey: 17, Reply: reply})
	e, err := tb.Pop(respFrame(own))
	if err != nil || e.Kind != Own || e.Reply == nil {
		t.Fatalf("own entry popped as %+v, %v", e, err)
	}
}
