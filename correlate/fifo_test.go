package correlate

import (
	"errors"
	"math"
	"testing"
	"time"
)

// TestFIFO pushes more entries than the ring holds over the test's life and
// pops them in order, each response matched by the upstream id Push gave.
// Each popped Entry must carry what the response side needs to restore the
// client's view.
func TestFIFO(t *testing.T) {
	tb := New(8)
	start := time.Unix(1700000000, 0)
	span, throttle := new(int), 250*time.Millisecond
	var ids []int32
	next := 0
	push := func(n int) {
		for ; n > 0; n-- {
			id, err := tb.Push(Entry{Kind: Forwarded, APIKey: int16(next % 70), APIVersion: int16(next % 13),
				ClientID: int32(1000 + next), Start: start.Add(time.Duration(next)), ReqBytes: next, Span: span, Throttle: throttle})
			if err != nil {
				t.Fatalf("push %d: %v", next, err)
			}
			ids = append(ids, id)
			next++
		}
	}
	popped := 0
	pop := func(n int) {
		for ; n > 0; n-- {
			e, err := tb.Pop(respFrame(ids[popped], 0, 0))
			if err != nil {
				t.Fatalf("pop %d: %v", popped, err)
			}
			if e.UpstreamID != ids[popped] || e.ClientID != int32(1000+popped) || e.APIKey != int16(popped%70) ||
				e.APIVersion != int16(popped%13) || e.ReqBytes != popped || !e.Start.Equal(start.Add(time.Duration(popped))) ||
				e.Span != span || e.Throttle != throttle || e.Kind != Forwarded {
				t.Fatalf("pop %d: got %+v", popped, e)
			}
			popped++
		}
	}
	// Uneven push/pop batches move the head all around the ring.
	for _, step := range [][2]int{{8, 3}, {3, 5}, {4, 7}, {8, 8}, {5, 1}, {4, 8}} {
		push(step[0])
		if tb.Len() != next-popped {
			t.Fatalf("Len %d, want %d", tb.Len(), next-popped)
		}
		pop(step[1])
	}
	if tb.Len() != 0 {
		t.Fatalf("Len %d after popping everything", tb.Len())
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Fatalf("id %d given twice in a row", ids[i])
		}
	}
}

// TestUpstreamIDsWrap starts the id counter just below MaxInt32: ids must
// wrap to MinInt32 and stay distinct and matchable, since a long-lived
// connection will get there.
func TestUpstreamIDsWrap(t *testing.T) {
	tb := New(4)
	tb.nextID.Store(math.MaxInt32 - 2)
	want := []int32{math.MaxInt32 - 2, math.MaxInt32 - 1, math.MaxInt32, math.MinInt32, math.MinInt32 + 1, math.MinInt32 + 2}
	for i, w := range want {
		id, err := tb.Push(Entry{ClientID: int32(i)})
		if err != nil || id != w {
			t.Fatalf("push %d: id %d, %v; want %d", i, id, err, w)
		}
		if i >= 2 { // keep up to three in flight across the wrap
			e, err := tb.Pop(respFrame(want[i-2]))
			if err != nil || e.ClientID != int32(i-2) {
				t.Fatalf("pop %d: %+v, %v", i-2, e, err)
			}
		}
	}
}

// TestClientIDsAreOpaque pushes negative, repeated and reserved client ids
// (the Java client wraps into negatives and uses 2^31-8.. for
// re-authentication). The table must not key on them.
func TestClientIDsAreOpaque(t *testing.T) {
	clientIDs := []int32{-1, -1, 0, math.MinInt32, math.MaxInt32 - 7, math.MaxInt32, 7, 7, 7}
	tb := New(len(clientIDs))
	var ids []int32
	for _, c := range clientIDs {
		id, err := tb.Push(Entry{ClientID: c})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i, c := range clientIDs {
		e, err := tb.Pop(respFrame(ids[i]))
		if err != nil || e.ClientID != c {
			t.Fatalf("pop %d: client id %d, %v; want %d", i, e.ClientID, err, c)
		}
	}
}

// TestEmptyTable checks a response with nothing in flight is refused.
func TestEmptyTable(t *testing.T) {
	tb := New(2)
	if _, err := tb.Pop(respFrame(0)); !errors.Is(err, ErrUnexpectedResponse) {
		t.Fatalf("empty: %v", err)
	}
	id, _ := tb.Push(Entry{})
	if _, err := tb.Pop(respFrame(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Pop(respFrame(id)); !errors.Is(err, ErrUnexpectedResponse) {
		t.Fatalf("second answer to one request: %v", err)
	}
}
