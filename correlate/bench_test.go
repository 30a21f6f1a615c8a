package correlate

import (
	"testing"
	"time"

	"github.com/kproxy/kproxy/framing"
)

// pushPop is one request/response through the table, as on the relay's
// hot path.
func pushPop(tb *Table, e Entry, frame []byte) error {
	id, err := tb.Push(e)
	if err != nil {
		return err
	}
	framing.SetResponseCorrelationID(frame, id)
	_, err = tb.Pop(frame)
	return err
}

// BenchmarkPushPop measures a push and its matching pop, which must not
// allocate: the ring is allocated once.
func BenchmarkPushPop(b *testing.B) {
	b.ReportAllocs()
	tb := New(256)
	e := Entry{Kind: Forwarded, APIKey: 3, APIVersion: 12, ClientID: 42, Start: time.Now(), ReqBytes: 100}
	frame := respFrame(0, 0, 0, 0, 0)
	for b.Loop() {
		if err := pushPop(tb, e, frame); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPushPopDoesNotAllocate makes the zero-allocation promise a failing
// test, not only a benchmark number.
func TestPushPopDoesNotAllocate(t *testing.T) {
	tb := New(4)
	e := Entry{ClientID: 1, Start: time.Now()}
	frame := respFrame(0)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := pushPop(tb, e, frame); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per push/pop", allocs)
	}
}
