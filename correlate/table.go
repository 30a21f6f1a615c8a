package correlate

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/kproxy/kproxy/framing"
)

// ErrFull is returned by Push when the table holds MaxInFlight entries.
// The caller flushes what it has written, waits with WaitRoom, and retries.
var ErrFull = errors.New("in-flight table full")

// Table is the InFlight FIFO of one upstream connection. The request side
// pushes and the response side pops, each from one goroutine at a time
// (the pusher and the popper). Entries live in a ring that starts empty
// and doubles up to max as a connection pipelines deeper, so a connection
// costs entries for the most it has had in flight (never shrinking)
// rather than max_in_flight of them, and the steady state allocates
// nothing.
//
// A plain request and its response (the relay's hot path) pass without
// the mutex: the ring is a single-producer single-consumer queue, the
// pusher owning tail and the popper head, each on its own cache line, so
// the two directions of a busy connection, running on two cores, do not
// bounce a lock's cache line per frame. Everything else (kproxy's own
// answers, SASL entries, growing the ring, Close, Drain) takes mu. An
// operation under mu that changes what the other side's fast path reads
// (the ring itself, or entries it may be reading) first raises gate and
// waits until neither side is inside its fast path (fence); a fast path
// announces itself (pushing, popping) before it reads gate, so one of the
// two always sees the other.
type Table struct {
	_ cpu.CacheLinePad // off the line of whatever the heap put before it
	// Written by the popper.
	head    atomic.Uint64 // position of the oldest entry
	popping atomic.Bool   // the popper is in its fast path
	_       cpu.CacheLinePad
	// Written by the pusher.
	tail    atomic.Uint64 // position the next entry takes
	pushing atomic.Bool   // the pusher is in its fast path
	nextID  atomic.Int32
	_       cpu.CacheLinePad
	// Rarely written.
	gate atomic.Int32 // gateClosed | gateDraining | gateFence per fence under way: nonzero sends both sides to mu
	// saslOn mirrors sasl.on(), so client frames need Frame's lock only
	// in a SASL v0 exchange; synthetic counts the queued entries kproxy
	// answers itself, so looking for them costs one load. Both are
	// written under mu and read without it.
	saslOn    atomic.Bool
	synthetic atomic.Int32
	waiters   atomic.Int32 // goroutines in wait: a pop signals room only then
	mu        sync.Mutex
	room      chan struct{} // a token after a pop a waiter may need; closed by Close
	max       int
	ring      []Entry // replaced only by grow, under a fence
	sasl      saslState
	_         cpu.CacheLinePad // and off the line of whatever follows it
}

// The bits of Table.gate.
const (
	gateClosed   = 1 << iota // Close was called
	gateDraining             // Drain was called: Push takes nothing new
	gateFence                // added by each fence under way
)

// New returns a table that holds at most max entries.
func New(max int) *Table {
	return &Table{max: max, room: make(chan struct{}, 1)}
}

// firstRing is the ring's size at the first Push.
const firstRing = 4

// fenced runs f while neither side is in its fast path. The caller holds
// mu and is in neither fast path itself; the fast paths never wait, so
// the spin is short.
func (t *Table) fenced(f func()) {
	t.gate.Add(gateFence)
	t.quiesce()
	f()
	t.gate.Add(-gateFence)
}

// quiesce waits until neither side is in its fast path. The caller has
// made gate nonzero, so neither enters one again.
func (t *Table) quiesce() {
	for t.pushing.Load() || t.popping.Load() {
		runtime.Gosched()
	}
}

// grow doubles the ring (up to max), keeping every entry at its position.
// The caller holds mu, inside a fence.
func (t *Table) grow() {
	ring := make([]Entry, min(max(2*len(t.ring), firstRing), t.max))
	for p, end := t.head.Load(), t.tail.Load(); p != end; p++ {
		ring[p%uint64(len(ring))] = t.ring[p%uint64(len(t.ring))]
	}
	t.ring = ring
}

// Len is the number of entries awaiting a response.
func (t *Table) Len() int {
	h := t.head.Load() // first: tail never falls below it
	return int(t.tail.Load() - h)
}

// plain reports whether e's response is matched by correlation id alone,
// with no state of the table's to change: what the fast paths take.
func plain(e *Entry) bool {
	return e.Kind == Forwarded && (e.APIKey != framing.KeySaslHandshake || e.APIVersion != 0)
}

// Push appends e and returns the upstream correlation id given to it. It
// never blocks: a full table returns ErrFull, and one Drain was called on
// ErrDraining.
func (t *Table) Push(e Entry) (int32, error) {
	if plain(&e) {
		t.pushing.Store(true)
		if t.gate.Load() == 0 {
			tail := t.tail.Load()
			if tail-t.head.Load() < uint64(len(t.ring)) {
				id := t.nextID.Load()
				e.UpstreamID = id
				t.nextID.Store(id + 1) // wraps; ids are opaque to the broker
				t.ring[tail%uint64(len(t.ring))] = e
				t.tail.Store(tail + 1)
				t.pushing.Store(false)
				return id, nil
			}
		}
		t.pushing.Store(false)
	}
	return t.pushLocked(e)
}

// pushLocked is Push for everything but a plain entry with room in the
// ring. The popper's fast path may run meanwhile: it touches only the
// entries before tail.
func (t *Table) pushLocked(e Entry) (int32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch g := t.gate.Load(); {
	case g&gateClosed != 0:
		return 0, ErrClosed
	case g&gateDraining != 0:
		return 0, ErrDraining
	}
	n := t.Len()
	if n == t.max {
		return 0, ErrFull
	}
	if n == len(t.ring) {
		t.fenced(t.grow)
	}
	e.UpstreamID = t.nextID.Load()
	t.nextID.Store(e.UpstreamID + 1)
	switch e.Kind {
	case Forwarded:
		if e.APIKey == framing.KeySaslHandshake && e.APIVersion == 0 {
			t.sasl.handshakes++ // frames behind it wait for its answer
			t.saslOn.Store(true)
		}
	case RawToken:
		t.sasl.tokens++
	case Synthetic:
		t.synthetic.Add(1) // before the entry is published below
	}
	tail := t.tail.Load()
	t.ring[tail%uint64(len(t.ring))] = e
	t.tail.Store(tail + 1)
	return e.UpstreamID, nil
}

// NextID is the upstream id the next Push will assign. Only the pushing
// goroutine may rely on it.
func (t *Table) NextID() int32 { return t.nextID.Load() }

// WaitRoom blocks until the table has room (nil), is closed (ErrClosed), or
// d has passed (ErrFull), so the caller can check its own bounds meanwhile.
func (t *Table) WaitRoom(d time.Duration) error {
	return t.wait(d, ErrFull, func() bool { return t.Len() >= t.max })
}

// WaitEmpty blocks until nothing is in flight (nil), the table is closed
// (ErrClosed), or d has passed (ErrBusy): a connection about to
// re-authenticate lets every request it sent be answered first.
func (t *Table) WaitEmpty(d time.Duration) error {
	return t.wait(d, ErrBusy, func() bool { return t.Len() > 0 })
}

// wait blocks while blocked (called under mu) holds, until the table is
// closed (ErrClosed) or d has passed (timeout). A pop wakes it to look
// again: a waiter counts itself in waiters before it looks, and a pop
// looks at waiters after it moved head, so one of the two sees the
// other and no wake-up is lost.
func (t *Table) wait(d time.Duration, timeout error, blocked func() bool) error {
	t.waiters.Add(1)
	defer t.waiters.Add(-1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		t.mu.Lock()
		held, closed := blocked(), t.gate.Load()&gateClosed != 0
		t.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case !held:
			return nil
		}
		select {
		case <-t.room:
		case <-timer.C:
			return timeout
		}
	}
}

// Pop matches a response frame from upstream against the head entry and
// removes it. Synthetic entries at the head must have been taken with
// PopSynthetic first; finding one here is a caller bug reported as an error.
func (t *Table) Pop(frame []byte) (Entry, error) {
	t.popping.Store(true)
	if t.gate.Load() == 0 && len(frame) >= framing.SizeLen+4 {
		head := t.head.Load()
		if head != t.tail.Load() {
			h := &t.ring[head%uint64(len(t.ring))]
			if plain(h) && framing.ResponseCorrelationID(frame) == h.UpstreamID {
				e := *h
				*h = Entry{} // drop references to spans and frames
				t.head.Store(head + 1)
				// Signal before leaving the fast path: Close waits for
				// that (quiesce) before it closes room, so a signal never
				// lands on a closed channel.
				if t.waiters.Load() != 0 {
					t.signal()
				}
				t.popping.Store(false)
				return e, nil
			}
		}
	}
	t.popping.Store(false)
	return t.popLocked(frame)
}

// popLocked is Pop for every case but a plain entry answered in order. The
// pusher's fast path may run meanwhile: it touches only tail's entry.
func (t *Table) popLocked(frame []byte) (Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gate.Load()&gateClosed != 0 {
		return Entry{}, ErrClosed
	}
	head := t.head.Load()
	if head == t.tail.Load() {
		return Entry{}, ErrUnexpectedResponse
	}
	h := &t.ring[head%uint64(len(t.ring))]
	switch h.Kind {
	case RawToken:
		t.sasl.tokenAnswered()
		t.saslOn.Store(t.sasl.on())
	case Synthetic:
		return Entry{}, errors.New("synthetic response still queued ahead of an upstream response")
	default:
		if len(frame) < framing.SizeLen+4 {
			return Entry{}, errors.New("response shorter than its correlation id")
		}
		if got := framing.ResponseCorrelationID(frame); got != h.UpstreamID {
			return Entry{}, &MismatchError{Want: h.UpstreamID, Got: got, ClientID: h.ClientID}
		}
		if h.APIKey == framing.KeySaslHandshake && h.APIVersion == 0 {
			t.sasl.handshakeAnswered(frame, h.SaslRounds)
			t.saslOn.Store(t.sasl.on())
		}
	}
	return t.popHead(), nil
}

// HasSynthetic reports whether an entry kproxy answers itself is queued,
// without the lock: the response relay looks twice per response.
func (t *Table) HasSynthetic() bool { return t.synthetic.Load() != 0 }

// PopSynthetic removes and returns the head entry if kproxy answers it
// itself. The caller writes e.Response to the client, then calls again
// until ok is false.
func (t *Table) PopSynthetic() (e Entry, ok bool) {
	if t.synthetic.Load() == 0 {
		return Entry{}, false // nothing kproxy answers is queued: no lock
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	head := t.head.Load()
	if t.gate.Load()&gateClosed != 0 || head == t.tail.Load() || t.ring[head%uint64(len(t.ring))].Kind != Synthetic {
		return Entry{}, false
	}
	return t.popHead(), true
}

// popHead removes the head entry. The caller holds mu, and is the popper
// or has fenced it out.
func (t *Table) popHead() Entry {
	head := t.head.Load()
	i := head % uint64(len(t.ring))
	e := t.ring[i]
	if e.Kind == Synthetic {
		t.synthetic.Add(-1)
	}
	t.ring[i] = Entry{} // drop references to spans and frames
	t.head.Store(head + 1)
	t.signal()
	return e
}

// signal wakes a waiter after entries left the table.
func (t *Table) signal() {
	select {
	case t.room <- struct{}{}:
	default:
	}
}

// Close fails the table: every later call returns ErrClosed, a blocked
// WaitRoom returns, and the entries still in flight are returned so their
// spans and metrics can be finished.
func (t *Table) Close() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gate.Load()&gateClosed != 0 {
		return nil
	}
	t.gate.Or(gateClosed)
	t.quiesce() // a push under way lands before the entries are taken
	left := make([]Entry, 0, t.Len())
	for t.Len() > 0 {
		left = append(left, t.popHead())
	}
	close(t.room) // after the pops above, which signal it
	return left
}

// Closed reports whether Close was called: a wait for an own entry's
// answer ends then.
func (t *Table) Closed() bool { return t.gate.Load()&gateClosed != 0 }
