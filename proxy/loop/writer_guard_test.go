package loop

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/relay"
)

// frameSink accepts connections and hands over, per connection, the first
// n bytes it reads (fewer if the connection ends first).
func frameSink(t *testing.T, n int) (addr string, got <-chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan []byte, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				b, _ := io.ReadAll(io.LimitReader(c, int64(n)))
				ch <- b
			}()
		}
	}()
	return ln.Addr().String(), ch
}

func dialNetpoll(t *testing.T, addr string) netpoll.Connection {
	t.Helper()
	c := dialRetrying(t, addr)
	c.SetOnRequest(func(context.Context, netpoll.Connection) error { return nil })
	t.Cleanup(func() { c.Close() })
	return c
}

// closingWriter is a connection's writer that closes the connection from
// another goroutine in the middle of a copy kproxy makes into it (after
// the space is taken, before the bytes are copied), and waits to see
// whether the close gets past the callbacks that must wait for the copy.
// If it does, overtaken runs before the copy goes on.
type closingWriter struct {
	netpoll.Writer
	conn      netpoll.Connection
	through   chan struct{} // closed by a close callback older than the guard's
	overtaken func()
	overtook  bool
}

func (w *closingWriter) Malloc(n int) ([]byte, error) {
	buf, err := w.Writer.Malloc(n)
	go w.conn.Close()
	select {
	case <-w.through:
		w.overtook = true
		w.overtaken()
	case <-time.After(300 * time.Millisecond):
		// Held by the guard, as it should be; the copy goes on.
	}
	return buf, err
}

// A connection closing while a goroutine copies a batch into its writer
// (a raw send's remainder, a response batch for a client that leaves) must
// wait for the copy: netpoll frees the writer's buffers to a pool that the
// next connection takes from, and a copy finishing after that lands in
// that connection's stream. The fake upstream of
// TestClosingPairsWhileTheyRelayOnThePoller once got a client's 10-byte
// response that way, in the middle of its requests.
func TestCloseWaitsForACopyIntoTheWriter(t *testing.T) {
	req := apiVersionsV0(6)
	addr, got := frameSink(t, len(req))
	x := dialNetpoll(t, addr)
	through := make(chan struct{})
	x.AddCloseCallback(func(netpoll.Connection) error { close(through); return nil })
	g := guardWrites(x)
	// The next connection writes a request, its writer taking a buffer
	// from the pool x's go back to: during the copy if x's close got
	// through (the copy then lands on it), after it if not.
	var y netpoll.Connection
	next := func() {
		<-got // x's own (empty) stream
		y = dialNetpoll(t, addr)
		if _, err := y.Writer().WriteBinary(req); err != nil {
			t.Error(err)
		}
	}
	w := &closingWriter{Writer: x.Writer(), conn: x, through: through, overtaken: next}
	response := []byte{0, 0, 0, 6, 0, 0, 0, 9, 0, 0}
	if err := g.copyIn(w, [][]byte{response}); err != nil {
		t.Fatalf("copy into an open connection: %v", err)
	}
	if w.overtook {
		t.Error("the connection's close got past its guard while a copy into its writer was under way")
	}
	select {
	case <-through:
	case <-time.After(10 * time.Second):
		t.Fatal("the close never finished once the copy was done")
	}
	if y == nil {
		next()
	}
	if err := y.Writer().Flush(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, req) {
		t.Fatalf("another connection's peer got % x, want its request % x", b, req)
	}
}

// Once a connection has closed, kproxy's writes to it fail without
// touching its writer, whose buffers netpoll has given back.
func TestWritesAfterCloseTouchNothing(t *testing.T) {
	addr, _ := frameSink(t, 1)
	x := dialNetpoll(t, addr)
	g := guardWrites(x)
	x.Close()
	b := relay.Batch{apiVersionsV0(1)}
	if err := g.writeBatch(x.Writer(), &b); err != errGone {
		t.Fatalf("batch written after close: %v, want errGone", err)
	}
	if len(b) != 0 {
		t.Fatal("the batch was not emptied")
	}
	if err := g.copyIn(x.Writer(), [][]byte{[]byte("late")}); err != errGone {
		t.Fatalf("copy after close: %v, want errGone", err)
	}
	// A guard made after the close (its callback would never run) is
	// closed too.
	if late := guardWrites(x); late.enter() {
		late.leave()
		t.Fatal("a guard made after the close lets writes in")
	}
}

// apiVersionsV0 is an ApiVersions v0 request with correlation ID corr
// (copied from package proxy's faults_test.go and wire_test.go).
func apiVersionsV0(corr int32) []byte {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = 0
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test")).AppendRequest(nil, r, corr)
}
