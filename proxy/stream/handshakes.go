package stream

import (
	"crypto/tls"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kproxy/kproxy/proxy/core"
)

// A TLS handshake costs kproxy memory (crypto/tls buffers a handshake
// message whole: a ClientHello of up to 64 KiB, a client Certificate
// message of up to 256 KiB) and CPU (an RSA-4096 signature is ~11 ms),
// and costs the client nothing until it finishes. Handshakes are bounded
// apart from connections, so that idle or half-sent handshakes can neither
// lock real clients out of max_connections, nor hold memory the budget
// does not see, nor starve the relays of CPU.

// handshakeReserve is what one handshake in progress reserves of
// max_buffered_bytes: the largest handshake message crypto/tls will
// buffer (a Certificate message), and a record's buffer beside it.
const handshakeReserve = 256<<10 + 16<<10

// DefaultMaxHandshakes is tls.listener.max_handshakes when 0.
const DefaultMaxHandshakes = 256

var (
	errHandshakeEvicted = errors.New("handshake dropped for a newcomer: it had made no progress the longest, with max_handshakes in progress")
	errHandshakeBudget  = errors.New("handshake refused: its buffer reservation would pass max_buffered_bytes")
)

// handshakes are the client handshakes in progress on a listener: at most
// max of them, each holding a reservation of the budget; past max, the one
// that has made no progress the longest is dropped for the newcomer, so
// a client that sends its handshake is never locked out by idle ones. cpu
// queues the expensive part of a handshake (from the ClientHello on) on
// fewer slots than the machine has CPUs, so handshakes cannot starve the
// relays.
type handshakes struct {
	max    int
	budget *core.Budget
	cpu    chan struct{}

	mu      sync.Mutex
	live    map[*handshake]struct{}
	evicted atomic.Int64
}

// handshake is one client handshake in progress.
type handshake struct {
	raw net.Conn
	// dropped is set when enter dropped it for a newcomer.
	dropped atomic.Bool
	// progress is when a byte of it last arrived (unix nanoseconds).
	progress atomic.Int64
	// cpu is set while it holds a cpu slot; under its goroutine (the
	// handshake's), or the close.
	cpu atomic.Bool
	hs  *handshakes
}

// cpuSlots is how many handshakes compute at once: one less than the CPUs
// Go may use, and at least one, so a core is always left to the relays.
func cpuSlots() int { return max(1, runtime.GOMAXPROCS(0)-1) }

func newHandshakes(max int, budget *core.Budget) *handshakes {
	if max == 0 {
		max = DefaultMaxHandshakes
	}
	return &handshakes{max: max, budget: budget, cpu: make(chan struct{}, cpuSlots()), live: map[*handshake]struct{}{}}
}

// enter admits a handshake on raw, dropping the stalest one in progress
// if max are, and reserves its buffers; leave must follow.
func (hs *handshakes) enter(raw net.Conn) (*handshake, error) {
	if !hs.budget.Take(handshakeReserve) {
		return nil, errHandshakeBudget
	}
	h := &handshake{raw: raw, hs: hs}
	h.progress.Store(time.Now().UnixNano())
	hs.mu.Lock()
	var stalest *handshake
	if len(hs.live) >= hs.max {
		for o := range hs.live {
			if stalest == nil || o.progress.Load() < stalest.progress.Load() {
				stalest = o
			}
		}
		delete(hs.live, stalest)
	}
	hs.live[h] = struct{}{}
	hs.mu.Unlock()
	if stalest != nil {
		hs.evicted.Add(1)
		stalest.dropped.Store(true)
		stalest.raw.Close() // its handshake fails with a closed connection
	}
	return h, nil
}

// leave ends a handshake: its slot, its reservation, its cpu slot.
func (hs *handshakes) leave(h *handshake) {
	hs.mu.Lock()
	delete(hs.live, h)
	hs.mu.Unlock()
	h.releaseCPU()
	hs.budget.Take(-handshakeReserve)
}

// Len is how many handshakes are in progress.
func (hs *handshakes) Len() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return len(hs.live)
}

// read notes that bytes of the handshake arrived.
func (h *handshake) read() { h.progress.Store(time.Now().UnixNano()) }

// takeCPU waits, until done is closed, for a cpu slot.
func (h *handshake) takeCPU(done <-chan struct{}) error {
	select {
	case h.hs.cpu <- struct{}{}:
		h.cpu.Store(true)
		return nil
	case <-done:
		return errors.New("handshake timed out waiting for a CPU slot")
	}
}

// releaseCPU gives the cpu slot back, once.
func (h *handshake) releaseCPU() {
	if h.cpu.CompareAndSwap(true, false) {
		<-h.hs.cpu
	}
}

// withCPUSlots wraps base so that a handshake takes a cpu slot once its
// ClientHello is in, before crypto/tls computes anything costly, and gives
// it back when its first flight is written (heldConn.Write) or it ends.
func withCPUSlots(base *tls.Config) *tls.Config {
	c := base.Clone()
	c.GetConfigForClient = func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		if held, ok := chi.Conn.(*heldConn); ok && held.hs != nil {
			if err := held.hs.takeCPU(chi.Context().Done()); err != nil {
				return nil, err
			}
		}
		if base.GetConfigForClient != nil {
			return base.GetConfigForClient(chi)
		}
		return nil, nil
	}
	return c
}

// evictedNow reports whether h was dropped for a newcomer.
func (hs *handshakes) evictedNow(h *handshake) bool { return h.dropped.Load() }
