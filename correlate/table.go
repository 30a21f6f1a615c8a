package correlate

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kproxy/kproxy/framing"
)

// ErrFull is returned by Push when the table holds MaxInFlight entries.
// The caller flushes what it has written, waits with WaitRoom, and retries.
var ErrFull = errors.New("in-flight table full")

// Table is the InFlight FIFO of one upstream connection. The request side
// pushes and the response side pops from their own goroutines; a mutex
// keeps the two in step. Entries live in a ring that starts empty and
// doubles up to max as a connection pipelines deeper, so a connection
// costs entries for the most it has had in flight (never shrinking)
// rather than max_in_flight of them, and the steady state allocates
// nothing.
type Table struct {
	mu     sync.Mutex
	room   chan struct{} // a token after each pop; closed by Close
	max    int
	ring   []Entry
	head   int
	n      int
	nextID int32
	closed bool
	// draining is set by Drain: Push takes nothing new.
	draining bool
	sasl     saslState

	// Mirrors of state kept under mu, read without it on the hot path:
	// whether client frames need Frame's lock (saslState.on), and how many
	// synthetic entries are queued. Both are written only under mu.
	saslOn    atomic.Bool
	synthetic atomic.Int32
}

// New returns a table that holds at most max entries.
func New(max int) *Table {
	return &Table{max: max, room: make(chan struct{}, 1)}
}

// firstRing is the ring's size at the first Push.
const firstRing = 4

// grow doubles the ring (up to max), keeping the entries in FIFO order
// from index 0. The caller holds mu.
func (t *Table) grow() {
	ring := make([]Entry, min(max(2*len(t.ring), firstRing), t.max))
	for i := range t.n {
		ring[i] = t.ring[(t.head+i)%len(t.ring)]
	}
	t.ring, t.head = ring, 0
}

// Len is the number of entries awaiting a response.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// Push appends e and returns the upstream correlation id given to it. It
// never blocks: a full table returns ErrFull, and one Drain was called on
// ErrDraining.
func (t *Table) Push(e Entry) (int32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, ErrClosed
	}
	if t.draining {
		return 0, ErrDraining
	}
	if t.n == t.max {
		return 0, ErrFull
	}
	if t.n == len(t.ring) {
		t.grow()
	}
	e.UpstreamID = t.nextID
	t.nextID++ // wraps; ids are opaque to the broker
	switch e.Kind {
	case Forwarded:
		if e.APIKey == framing.KeySaslHandshake && e.APIVersion == 0 {
			t.sasl.handshakes++ // frames behind it wait for its answer
			t.saslOn.Store(true)
		}
	case RawToken:
		t.sasl.tokens++
	case Synthetic:
		t.synthetic.Add(1)
	}
	t.ring[(t.head+t.n)%len(t.ring)] = e
	t.n++
	return e.UpstreamID, nil
}

// NextID is the upstream id the next Push will assign. Only the pushing
// goroutine may rely on it.
func (t *Table) NextID() int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nextID
}

// WaitRoom blocks until the table has room (nil), is closed (ErrClosed), or
// d has passed (ErrFull), so the caller can check its own bounds meanwhile.
func (t *Table) WaitRoom(d time.Duration) error {
	return t.wait(d, ErrFull, func() bool { return t.n == t.max })
}

// WaitEmpty blocks until nothing is in flight (nil), the table is closed
// (ErrClosed), or d has passed (ErrBusy): a connection about to
// re-authenticate lets every request it sent be answered first.
func (t *Table) WaitEmpty(d time.Duration) error {
	return t.wait(d, ErrBusy, func() bool { return t.n > 0 })
}

// wait blocks while blocked (called under mu) holds, until the table is
// closed (ErrClosed) or d has passed (timeout). Every pop wakes it to look
// again; only the request side waits, so one waiter at a time.
func (t *Table) wait(d time.Duration, timeout error, blocked func() bool) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		t.mu.Lock()
		held, closed := blocked(), t.closed
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
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return Entry{}, ErrClosed
	}
	if t.n == 0 {
		return Entry{}, ErrUnexpectedResponse
	}
	h := &t.ring[t.head]
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

// PopSynthetic removes and returns the head entry if kproxy answers it
// itself. The caller writes e.Response to the client, then calls again
// until ok is false.
func (t *Table) PopSynthetic() (e Entry, ok bool) {
	if t.synthetic.Load() == 0 {
		return Entry{}, false // nothing kproxy answers is queued: no lock
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.n == 0 || t.ring[t.head].Kind != Synthetic {
		return Entry{}, false
	}
	return t.popHead(), true
}

func (t *Table) popHead() Entry {
	e := t.ring[t.head]
	if e.Kind == Synthetic {
		t.synthetic.Add(-1)
	}
	t.ring[t.head] = Entry{} // drop references to spans and frames
	t.head = (t.head + 1) % len(t.ring)
	t.n--
	t.signal()
	return e
}

// signal wakes a waiter after entries left the table. The caller holds mu.
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
	if t.closed {
		return nil
	}
	t.closed = true
	left := make([]Entry, 0, t.n)
	for t.n > 0 {
		left = append(left, t.popHead())
	}
	close(t.room) // after the pops above, which signal it
	return left
}

// Closed reports whether Close was called: a wait for an own entry's
// answer ends then.
func (t *Table) Closed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}
