package correlate

import (
	"errors"
	"testing"
)

// TestCloseReturnsLeftovers checks Close hands back every unanswered entry
// in request order (their spans and metrics must be finished), and that the
// table refuses everything afterwards.
func TestCloseReturnsLeftovers(t *testing.T) {
	tb := New(4)
	a, _ := tb.Push(Entry{ClientID: 1})
	_, _ = tb.Push(Entry{ClientID: 2})
	_, _ = tb.Pop(respFrame(a))
	_, _ = tb.Push(Entry{ClientID: 3, Kind: Synthetic})
	_, _ = tb.Push(Entry{ClientID: 4, Kind: RawToken})
	_, _ = tb.Push(Entry{ClientID: 5}) // wraps the ring

	left := tb.Close()
	want := []int32{2, 3, 4, 5}
	if len(left) != len(want) {
		t.Fatalf("Close returned %d entries, want %d", len(left), len(want))
	}
	for i, e := range left {
		if e.ClientID != want[i] || e.UpstreamID != int32(i+1) {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	if tb.Len() != 0 {
		t.Fatalf("Len %d after Close", tb.Len())
	}
	if _, err := tb.Push(Entry{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Push: %v", err)
	}
	if _, err := tb.Pop(respFrame(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Pop: %v", err)
	}
	if _, ok := tb.PopSynthetic(); ok {
		t.Fatal("PopSynthetic after Close")
	}
	if again := tb.Close(); len(again) != 0 {
		t.Fatalf("second Close returned %d entries", len(again))
	}
}

// TestCloseEmpty checks closing a table with nothing in flight.
func TestCloseEmpty(t *testing.T) {
	tb := New(1)
	if left := tb.Close(); len(left) != 0 {
		t.Fatalf("%d entries", len(left))
	}
	tb.Close()
}
