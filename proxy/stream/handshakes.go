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
	"github.com/kproxy/kproxy/tlsconf"
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
	errHandshakeBudget = errors.New("handshake refused: its buffer reservation would pass max_buffered_bytes")
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

	mu   sync.Mutex
	live map[*handshake]struct{}
}

// handshake is one client handshake in progress.
type handshake struct {
	raw net.Conn
	// dropped is set when enter dropped it for a newcomer, which took
	// over its reservation; gone is closed then, so a wait for a cpu slot
	// ends at once.
	dropped atomic.Bool
	gone    chan struct{}
	// hello is set once its ClientHello is in: a handshake that has sent
	// one is dropped only if none is missing one.
	hello atomic.Bool
	// progress is when a byte of it last arrived (unix nanoseconds).
	progress atomic.Int64
	// cpu is set while it holds a cpu slot; under its goroutine (the
	// handshake's), or the close.
	cpu atomic.Bool
	hs  *handshakes
}

// cpuSlots is how many handshakes compute at once: one less than the CPUs
// Go may use, and at least one, so a core is always left to the relays
// (or what SetHandshakeCPUSlots set).
func cpuSlots() int {
	if n := cpuSlotsSet.Load(); n > 0 {
		return int(n)
	}
	return max(1, runtime.GOMAXPROCS(0)-1)
}

// cpuSlotsSet is SetHandshakeCPUSlots' value; 0 for the default.
var cpuSlotsSet atomic.Int32

func newHandshakes(max int, budget *core.Budget) *handshakes {
	if max == 0 {
		max = DefaultMaxHandshakes
	}
	return &handshakes{max: max, budget: budget, cpu: make(chan struct{}, cpuSlots()), live: map[*handshake]struct{}{}}
}

// enter admits a handshake on raw, dropping the stalest one in progress
// if max are, and reserves its buffers; leave must follow.
func (hs *handshakes) enter(raw net.Conn) (*handshake, error) {
	h := &handshake{raw: raw, hs: hs, gone: make(chan struct{})}
	h.progress.Store(time.Now().UnixNano())
	hs.mu.Lock()
	var stalest *handshake
	if len(hs.live) >= hs.max {
		stalest = hs.stalestLocked()
		delete(hs.live, stalest)
	}
	// The newcomer takes over a dropped handshake's reservation, so a
	// full budget never keeps eviction from making room.
	if stalest == nil && !hs.budget.Take(handshakeReserve) {
		hs.mu.Unlock()
		return nil, errHandshakeBudget
	}
	hs.live[h] = struct{}{}
	hs.mu.Unlock()
	if stalest != nil {
		stalest.dropped.Store(true)
		close(stalest.gone)
		stalest.raw.Close() // its handshake fails with a closed connection
	}
	return h, nil
}

// stalestLocked is the handshake to drop for a newcomer: of those that
// have not sent a ClientHello, the one with no progress the longest, or
// of all when every one has. The caller holds mu.
func (hs *handshakes) stalestLocked() *handshake {
	var stalest *handshake
	for o := range hs.live {
		switch {
		case stalest == nil:
			stalest = o
		case stalest.hello.Load() != o.hello.Load():
			if !o.hello.Load() {
				stalest = o
			}
		case o.progress.Load() < stalest.progress.Load():
			stalest = o
		}
	}
	return stalest
}

// leave ends a handshake: its slot, its reservation, its cpu slot.
func (hs *handshakes) leave(h *handshake) {
	hs.mu.Lock()
	delete(hs.live, h)
	hs.mu.Unlock()
	h.releaseCPU()
	if !h.dropped.Load() { // a dropped one's reservation went to the newcomer
		hs.budget.Take(-handshakeReserve)
	}
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
	case <-h.gone:
		return tlsconf.ErrEvicted
	}
}

// releaseCPU gives the cpu slot back, once.
func (h *handshake) releaseCPU() {
	if h.cpu.CompareAndSwap(true, false) {
		<-h.hs.cpu
	}
}

// withCPUSlots wraps base so that a handshake takes a cpu slot just
// before crypto/tls signs for it: when it asks for the certificate,
// which comes after a HelloRetryRequest (a write that must not give the
// slot back early), never before the ClientHello is in. The slot goes back
// when the server's flight is written (heldConn.Write) or the handshake
// ends.
func withCPUSlots(base *tls.Config) *tls.Config {
	c := base.Clone()
	c.GetConfigForClient = func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		inner := base
		if base.GetConfigForClient != nil {
			got, err := base.GetConfigForClient(chi)
			if err != nil {
				return nil, err
			}
			if got != nil {
				inner = got
			}
		}
		held, ok := chi.Conn.(*heldConn)
		if !ok || held.hs == nil || len(inner.Certificates) == 0 {
			return inner, nil
		}
		h := held.hs
		h.hello.Store(true) // its ClientHello is in: not the stalest to drop
		cfg := inner.Clone()
		certs := cfg.Certificates
		cfg.Certificates, cfg.GetConfigForClient = nil, nil
		cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if err := h.takeCPU(hello.Context().Done()); err != nil {
				return nil, err
			}
			return &certs[0], nil
		}
		return cfg, nil
	}
	return c
}

// evicted reports whether h was dropped for a newcomer.
func (h *handshake) evicted() bool { return h.dropped.Load() }
