package framing_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/framing"
)

// feed makes b readable on lb as a netpoll connection would.
func feed(t testing.TB, lb *netpoll.LinkBuffer, b []byte) {
	t.Helper()
	if len(b) == 0 {
		return
	}
	if _, err := lb.WriteBinary(b); err != nil {
		t.Fatal(err)
	}
	if err := lb.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestBufferedWaitsForWholeFrame grows a frame one byte at a time: Buffered
// must say "not yet" until its last byte, and report the full length as soon
// as the prefix is in.
func TestBufferedWaitsForWholeFrame(t *testing.T) {
	frame := requestFrame(reqHeader{key: 3, version: 1, corr: 1, clientID: []byte("c")}, 1, []byte("body"))
	lb := netpoll.NewLinkBuffer()
	defer lb.Close()
	for i := 0; i < len(frame); i++ {
		n, ok, err := framing.Buffered(lb, 1<<20)
		if err != nil || ok {
			t.Fatalf("after %d bytes: n %d ok %v err %v", i, n, ok, err)
		}
		if i >= framing.SizeLen && n != len(frame) {
			t.Fatalf("after %d bytes: n %d, want %d", i, n, len(frame))
		}
		if i < framing.SizeLen && n != 0 {
			t.Fatalf("after %d bytes: n %d without a prefix", i, n)
		}
		feed(t, lb, frame[i:i+1])
	}
	n, ok, err := framing.Buffered(lb, 1<<20)
	if err != nil || !ok || n != len(frame) {
		t.Fatalf("whole: n %d ok %v err %v", n, ok, err)
	}
	got, err := framing.Next(lb, 1<<20)
	if err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("Next: %x, %v", got, err)
	}
	if lb.Len() != 0 {
		t.Fatalf("%d bytes left", lb.Len())
	}
}

// TestNextTakesOneFrameAtATime buffers several frames, a zero-size one and
// one larger than a buffer node among them, plus the start of another.
func TestNextTakesOneFrameAtATime(t *testing.T) {
	frames := [][]byte{
		withSize(nil),
		withSize([]byte("a")),
		withSize(bytes.Repeat([]byte("big"), 20000)),
		requestFrame(reqHeader{key: 18, version: 3, corr: -1, clientID: []byte{}}, 2, []byte{0}),
	}
	lb := netpoll.NewLinkBuffer()
	defer lb.Close()
	for _, f := range frames {
		feed(t, lb, f[:len(f)/2])
		feed(t, lb, f[len(f)/2:])
	}
	partial := withSize([]byte("partial"))[:6]
	feed(t, lb, partial)
	for i, want := range frames {
		n, ok, err := framing.Buffered(lb, 1<<20)
		if err != nil || !ok || n != len(want) {
			t.Fatalf("frame %d: n %d ok %v err %v", i, n, ok, err)
		}
		got, err := framing.Next(lb, 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: got %d bytes, want %d, err %v", i, len(got), len(want), err)
		}
	}
	if n, ok, err := framing.Buffered(lb, 1<<20); ok || err != nil || n != 11 {
		t.Fatalf("partial: n %d ok %v err %v", n, ok, err)
	}
	if lb.Len() != len(partial) {
		t.Fatalf("partial frame consumed: %d bytes left", lb.Len())
	}
}

// TestBufferedRefusesEarly checks a bad prefix is reported as soon as its
// four bytes are in, before any body byte: the peer is never waited on for
// a frame that will be refused.
func TestBufferedRefusesEarly(t *testing.T) {
	for name, p := range map[string][]byte{
		"too large": prefix(1025),
		"negative":  prefix(-4),
		"TLS":       {0x16, 0x03, 0x01, 0x00},
		"HTTP":      []byte("GET "),
	} {
		lb := netpoll.NewLinkBuffer()
		feed(t, lb, p[:3])
		if _, ok, err := framing.Buffered(lb, 1024); ok || err != nil {
			t.Fatalf("%s: 3 bytes: ok %v err %v", name, ok, err)
		}
		feed(t, lb, p[3:])
		_, ok, err := framing.Buffered(lb, 1024)
		var se *framing.SizeError
		if ok || !errors.As(err, &se) {
			t.Fatalf("%s: Buffered ok %v err %v", name, ok, err)
		}
		if _, err := framing.Next(lb, 1024); !errors.As(err, &se) {
			t.Fatalf("%s: Next err %v", name, err)
		}
		if lb.Len() != 4 {
			t.Fatalf("%s: a refused prefix was consumed", name)
		}
		lb.Close()
	}
}

// stubReader is a netpoll.Reader whose Peek fails, as a connection's does on
// a read timeout or close; only the methods framing calls are implemented.
type stubReader struct {
	netpoll.Reader
	n   int
	err error
}

func (r stubReader) Len() int                 { return r.n }
func (r stubReader) Peek(int) ([]byte, error) { return nil, r.err }

// TestReaderErrorsPassThrough checks the reader's own error reaches the
// caller unchanged, so it can tell a timeout from a closed peer.
func TestReaderErrorsPassThrough(t *testing.T) {
	r := stubReader{n: 4, err: netpoll.ErrReadTimeout}
	if _, err := framing.Next(r, 100); !errors.Is(err, netpoll.ErrReadTimeout) {
		t.Fatalf("Next: %v", err)
	}
	if _, ok, err := framing.Buffered(r, 100); ok || !errors.Is(err, netpoll.ErrReadTimeout) {
		t.Fatalf("Buffered: ok %v err %v", ok, err)
	}
	// With fewer than four bytes Buffered must not even peek.
	r.n = 3
	if _, ok, err := framing.Buffered(r, 100); ok || err != nil {
		t.Fatalf("Buffered with 3 bytes: ok %v err %v", ok, err)
	}
}
