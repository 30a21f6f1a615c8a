package correlate

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kproxy/kproxy/framing"
)

// TestConcurrentPushPop runs the two relay directions at once, as the proxy
// does: one goroutine pushes (waiting for room when full), the other pops
// responses in order and takes synthetic entries when they reach the head.
// Run with -race.
func TestConcurrentPushPop(t *testing.T) {
	const n = 20000
	tb := New(16)
	pushed := make(chan struct{}, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(pushed)
		for i := 0; i < n; i++ {
			e := Entry{ClientID: int32(i)}
			if i%7 == 3 {
				e.Kind, e.Response = Synthetic, respFrame(int32(i))
			}
			for {
				_, err := tb.Push(e)
				if err == nil {
					break
				}
				if !errors.Is(err, ErrFull) {
					t.Errorf("push %d: %v", i, err)
					return
				}
				if err := tb.WaitRoom(10 * time.Second); err != nil {
					t.Errorf("wait %d: %v", i, err)
					return
				}
			}
			pushed <- struct{}{}
		}
	}()
	frame := respFrame(0, 1, 2, 3)
	for i := 0; i < n; i++ {
		if _, ok := <-pushed; !ok {
			t.Fatalf("pusher stopped after %d entries", i)
		}
		if i%7 == 3 {
			e, ok := tb.PopSynthetic()
			if !ok || e.ClientID != int32(i) {
				t.Fatalf("synthetic %d: %+v %v", i, e, ok)
			}
			continue
		}
		framing.SetResponseCorrelationID(frame, int32(i)) // ids are given from 0 in push order
		e, err := tb.Pop(frame)
		if err != nil || e.ClientID != int32(i) {
			t.Fatalf("pop %d: %+v, %v", i, e, err)
		}
	}
	wg.Wait()
	if tb.Len() != 0 {
		t.Fatalf("Len %d", tb.Len())
	}
}
