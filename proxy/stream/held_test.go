package stream

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/testcerts"
)

// gatherConn holds back what is written while gather is set, so that
// several TLS records leave in one system call.
type gatherConn struct {
	net.Conn
	gather bool
	held   bytes.Buffer
}

func (c *gatherConn) Write(p []byte) (int, error) {
	if c.gather {
		return c.held.Write(p)
	}
	return c.Conn.Write(p)
}

// send writes what was held back, the first n bytes of it (all: n < 0).
func (c *gatherConn) send(t *testing.T, n int) {
	t.Helper()
	if n < 0 {
		n = c.held.Len()
	}
	if _, err := c.Conn.Write(c.held.Next(n)); err != nil {
		t.Fatal(err)
	}
}

// tlsPair is a TLS connection over loopback: the server side as kproxy
// makes it (over a heldConn), the client side over a gatherConn.
func tlsPair(t *testing.T) (server *tls.Conn, client *tls.Conn, gc *gatherConn) {
	ca := testcerts.NewCA(t, "held test CA")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sraw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	server = tls.Server(&heldConn{Conn: sraw}, &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS(t)}})
	gc = &gatherConn{Conn: raw}
	client = tls.Client(gc, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	done := make(chan error, 1)
	go func() { done <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client, gc
}

// Frames a peer wrote as separate TLS records that arrived together are
// all in one batch: Len counts the records tls.Conn holds whole (taking
// them without a system call), not only the one its last Read returned.
// A record only partly arrived stays for the next read, which completes
// it.
func TestStreamReaderTakesTheRecordsTLSHolds(t *testing.T) {
	server, client, gc := tlsPair(t)
	frames := [][]byte{produceLike(100), produceLike(200), produceLike(300)}
	gc.gather = true
	for _, f := range frames {
		if _, err := client.Write(f); err != nil { // a record each
			t.Fatal(err)
		}
	}
	gc.gather = false
	last := 5 + 16 + len(frames[2]) + 1 // the last record: header, tag, frame, content type
	gc.send(t, gc.held.Len()-last/2)    // two records and half the third, in one write

	r := newStreamReader(server, time.Second, nil)
	if r.tlsIn == nil {
		t.Fatal("the reader does not see the heldConn under its tls.Conn")
	}
	first, err := framing.Next(r, 1<<20)
	if err != nil || !bytes.Equal(first, frames[0]) {
		t.Fatalf("first frame: %v", err)
	}
	if got, want := r.Len(), len(frames[1]); got != want {
		t.Fatalf("Len after the first frame = %d, want %d (the second record, held whole by tls.Conn)", got, want)
	}
	n, whole, err := framing.Buffered(r, 1<<20)
	if err != nil || !whole || n != len(frames[1]) {
		t.Fatalf("Buffered = %d %v %v, want the second frame whole", n, whole, err)
	}
	second, _ := r.Next(n)
	if !bytes.Equal(second, frames[1]) {
		t.Fatal("second frame differs")
	}
	gc.send(t, -1) // the rest of the third record
	third, err := framing.Next(r, 1<<20)
	if err != nil || !bytes.Equal(third, frames[2]) {
		t.Fatalf("third frame, after a held read found its record partial: %v", err)
	}
}

// recordEnds follows records across reads that split them anywhere,
// headers included, so pending is set only when a read brought a second
// whole record.
func TestHeldConnCountsRecordEnds(t *testing.T) {
	record := func(n int) []byte {
		r := make([]byte, 5+n)
		r[0], r[1], r[2] = 23, 3, 3
		r[3], r[4] = byte(n>>8), byte(n)
		return r
	}
	var stream []byte
	for _, n := range []int{300, 0, 17, 1000} {
		stream = append(stream, record(n)...)
	}
	for _, c := range []struct {
		cuts []int // where reads end
		want []int // records ending in each read
	}{
		{[]int{len(stream)}, []int{4}},
		{[]int{2, 305, 310, 330, len(stream)}, []int{0, 1, 1, 0, 2}}, // 305: first record; 310: the empty one; 332: the third
		{[]int{3, 4, 305, 1000, len(stream)}, []int{0, 0, 1, 2, 1}},
	} {
		h := &heldConn{}
		from := 0
		for i, cut := range c.cuts {
			if got := h.recordEnds(stream[from:cut]); got != c.want[i] {
				t.Errorf("reads ending at %v: read %d (bytes %d-%d) ends %d records, want %d", c.cuts, i, from, cut, got, c.want[i])
			}
			from = cut
		}
	}
}

// produceLike is a Produce v7 frame of size bytes after its length (copied
// from package proxy's bench_test.go).
func produceLike(size int) []byte {
	f := make([]byte, 4+size)
	binary.BigEndian.PutUint32(f, uint32(size))
	binary.BigEndian.PutUint16(f[4:], 0)  // Produce
	binary.BigEndian.PutUint16(f[6:], 7)  // v7
	binary.BigEndian.PutUint16(f[12:], 4) // client id "bench"
	copy(f[14:], "bench")
	binary.BigEndian.PutUint16(f[18:], 0xffff) // null transactional id
	binary.BigEndian.PutUint16(f[20:], 0xffff) // acks -1
	return f
}
