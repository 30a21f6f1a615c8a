package stream

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/kproxy/kproxy/relay"
)

// recordingConn is a net.Conn that keeps each Write apart.
type recordingConn struct {
	net.Conn // nil: only Write and SetWriteDeadline are used
	writes   [][]byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (c *recordingConn) SetWriteDeadline(time.Time) error { return nil }

// frameOf is n bytes that say which frame they are (tag) and where in it.
func frameOf(tag byte, n int) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = tag + byte(i%251)
	}
	return f
}

// TestStreamWriterCoalescesSmallAndWritesLargeInPlace: small frames share
// one write; a frame of streamDirect bytes or more leaves in writes of its
// own, at most streamChunk each, after the small ones before it; the
// bytes and their order are those of the batch.
func TestStreamWriterCoalescesSmallAndWritesLargeInPlace(t *testing.T) {
	c := &recordingConn{}
	w := streamWriter{conn: c, stall: time.Second}
	large := streamChunk*2 + 1000
	b := relay.Batch{frameOf(1, 100), frameOf(2, 200), frameOf(3, large), frameOf(4, 300), frameOf(5, streamDirect)}
	var want []byte
	for _, f := range b {
		want = append(want, f...)
	}
	if err := w.write(&b); err != nil {
		t.Fatal(err)
	}
	if len(b) != 0 {
		t.Errorf("batch holds %d frames after write, want it emptied", len(b))
	}
	sizes := make([]int, len(c.writes))
	for i, p := range c.writes {
		sizes[i] = len(p)
	}
	wantSizes := []int{300, streamChunk, streamChunk, 1000, 300, streamDirect}
	if len(sizes) != len(wantSizes) {
		t.Fatalf("writes of %v bytes, want %v", sizes, wantSizes)
	}
	for i := range sizes {
		if sizes[i] != wantSizes[i] {
			t.Fatalf("writes of %v bytes, want %v", sizes, wantSizes)
		}
	}
	if got := bytes.Join(c.writes, nil); !bytes.Equal(got, want) {
		t.Fatal("bytes written differ from the batch's frames in order")
	}
}

// deadlineConn records the write deadlines set on it.
type deadlineConn struct {
	recordingConn
	deadlines []time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.deadlines = append(c.deadlines, t)
	return nil
}

// TestStreamWriterDeadlineGivesEveryWriteTheStall: writes in quick
// succession share one deadline, and every write starts with at least
// write_timeout of it left; one that would start with less re-arms it.
func TestStreamWriterDeadlineGivesEveryWriteTheStall(t *testing.T) {
	const stall = time.Hour // the writes below take far less than stall/8
	c := &deadlineConn{}
	w := streamWriter{conn: c, stall: stall}
	for i := range 10 {
		b := relay.Batch{frameOf(byte(i), 100)}
		before := time.Now()
		if err := w.write(&b); err != nil {
			t.Fatal(err)
		}
		if left := c.deadlines[len(c.deadlines)-1].Sub(before); left < stall {
			t.Fatalf("write %d started with %v of its deadline left, want at least %v", i, left, stall)
		}
	}
	if len(c.deadlines) != 1 {
		t.Errorf("%d deadlines set for 10 quick writes, want 1", len(c.deadlines))
	}
	w.until = time.Now().Add(stall - time.Second) // as if written from stall/8 ago
	b := relay.Batch{frameOf(9, 100)}
	before := time.Now()
	if err := w.write(&b); err != nil {
		t.Fatal(err)
	}
	if len(c.deadlines) != 2 || c.deadlines[1].Sub(before) < stall {
		t.Fatalf("deadlines %v: a write with less than the stall left did not re-arm it", c.deadlines)
	}
}
