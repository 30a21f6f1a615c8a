package stream

import (
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
)

// testBudget is a core's budget of max bytes.
func testBudget(t *testing.T, max int) *core.Budget {
	t.Helper()
	k := core.New(core.Limits{MaxBufferedBytes: max}, &relay.Env{Framing: framing.Defaults()}, zerolog.Nop(),
		core.NewMetrics(prometheus.NewRegistry()))
	return &k.Budget
}

// Past max, the handshake that made no progress the longest is dropped
// for the newcomer (its socket closed), one that made progress stays, and
// every handshake reserves its buffers until it leaves.
func TestHandshakesDropTheStalest(t *testing.T) {
	b := testBudget(t, 10<<20)
	hs := newHandshakes(2, b)
	pipe := func() net.Conn { a, _ := net.Pipe(); return a }
	first, err := hs.enter(pipe())
	if err != nil {
		t.Fatal(err)
	}
	second, _ := hs.enter(pipe())
	time.Sleep(time.Millisecond)
	first.read() // the first makes progress: the second is now the stalest
	third, err := hs.enter(pipe())
	if err != nil {
		t.Fatal(err)
	}
	if !second.dropped.Load() || first.dropped.Load() {
		t.Fatalf("dropped: first %v second %v, want the second (stalest)", first.dropped.Load(), second.dropped.Load())
	}
	if _, err := second.raw.Write([]byte{1}); err == nil {
		t.Fatal("the dropped handshake's socket is still open")
	}
	if hs.Len() != 2 {
		t.Fatalf("%d handshakes in progress, want 2", hs.Len())
	}
	for _, h := range []*handshake{first, second, third} {
		hs.leave(h)
	}
	if b.Used() != 0 {
		t.Fatalf("%d bytes still reserved after every handshake left", b.Used())
	}
	small := newHandshakes(8, testBudget(t, handshakeReserve))
	if _, err := small.enter(pipe()); err != nil {
		t.Fatal(err)
	}
	if _, err := small.enter(pipe()); err == nil {
		t.Fatal("a handshake was admitted past max_buffered_bytes")
	}
}

// The costly part of handshakes runs on cpuSlots slots: one more waits
// until the server flight of one is written (or it ends), and gives up at
// its deadline.
func TestHandshakesShareCPUSlots(t *testing.T) {
	hs := newHandshakes(100, testBudget(t, 100<<20))
	var held []*heldConn
	for range cpuSlots() {
		a, b := net.Pipe()
		go func() {
			buf := make([]byte, 64)
			for {
				if _, err := b.Read(buf); err != nil {
					return
				}
			}
		}()
		h, _ := hs.enter(a)
		if err := h.takeCPU(nil); err != nil {
			t.Fatal(err)
		}
		held = append(held, &heldConn{Conn: a, hs: h})
	}
	waiter, _ := hs.enter(func() net.Conn { a, _ := net.Pipe(); return a }())
	deadline := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(deadline) })
	if err := waiter.takeCPU(deadline); err == nil {
		t.Fatal("a handshake computed beside cpuSlots others")
	}
	held[0].Write([]byte("server flight")) // its costly part is done
	if err := waiter.takeCPU(nil); err != nil {
		t.Fatal(err)
	}
}
