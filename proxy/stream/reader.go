package stream

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/kproxy/kproxy/proxy/core"
)

// streamReadMin is a stream reader's buffer between large frames, and the
// least it asks the connection for in one read: a TLS record's payload.
const streamReadMin = 16 << 10

// shrinkAfter is how long a reader whose buffer grew for a large frame
// waits at a frame boundary before it gives that buffer back to its pool,
// and its charge to max_buffered_bytes: a stream of large frames keeps
// its buffer (growing one afresh for each frame cost a megabyte of copying
// per 1 MiB frame), a connection that got one large fetch and went idle
// holds it no longer than this.
const shrinkAfter = time.Second

// streamReader is framing.Source over a net.Conn (a tls.Conn, or a plain
// one paired with TLS): the stream driver's counterpart of netpoll's
// Reader. Unlike netpoll it reads only when asked for more than it holds,
// so a peer that outruns kproxy is held back by TCP, not buffered.
//
// Slices it returns stay valid until Release, which moves what is left
// unread to the front of the buffer. The buffer grows as a frame's bytes
// arrive (doubling, never to the frame's announced size before its bytes
// are in), copying only the unread bytes into the new array; the old one
// stays alive for the slices already returned.
type streamReader struct {
	conn net.Conn
	// tlsIn is the connection under conn when conn is a tls.Conn (nil
	// otherwise): Len takes the records it already holds.
	tlsIn *heldConn
	buf   []byte
	// base is the connection's own streamReadMin buffer, and big the
	// pool's handle of a larger one in use (nil when none, or when buf is
	// larger than the pools hold).
	base []byte
	big  *[]byte
	r, w int // unread input is buf[r:w]
	// held is where the slices returned since the last Release end: the
	// buffer before it must not be written over until then.
	held int
	// partial bounds each wait for more of a frame that has begun
	// (read_timeout); 0: unbounded. Between frames (waitFrame) a reader
	// waits as long as the peer stays idle.
	partial time.Duration
	// charge is told of each change of the buffer's size past
	// streamReadMin (a negative delta gives bytes back); false refuses a
	// growth.
	charge func(delta int) bool
	// deadline is set while the connection's read deadline is.
	deadline bool
}

func newStreamReader(c net.Conn, partial time.Duration, charge func(delta int) bool) *streamReader {
	return &streamReader{conn: c, tlsIn: heldOf(c), partial: partial, charge: charge}
}

// Len is how many bytes are buffered and unread, counting the records a
// tls.Conn under it has received whole, which it takes first (into the
// free space behind the unread bytes, never over slices returned): so a
// batch takes every frame that has arrived, not one record's.
func (s *streamReader) Len() int {
	if s.tlsIn != nil && s.tlsIn.whole > 0 {
		s.takeHeld()
	}
	return s.w - s.r
}

// takeHeld reads the records the tls.Conn holds whole, without a system
// call. An error (a record that fails to decrypt, a close) is left for
// the next read to return: crypto/tls keeps it.
func (s *streamReader) takeHeld() {
	s.tlsIn.held = true
	for s.tlsIn.whole > 0 && s.w < len(s.buf) {
		k, err := s.conn.Read(s.buf[s.w:])
		s.w += k
		if k > 0 {
			s.tlsIn.whole--
		}
		if err != nil {
			break
		}
	}
	s.tlsIn.held = false
}

// Peek returns the next n bytes, reading until they have arrived.
func (s *streamReader) Peek(n int) ([]byte, error) {
	if err := s.fill(n); err != nil {
		return nil, err
	}
	s.hold(s.r + n)
	return s.buf[s.r : s.r+n], nil
}

// Next returns and consumes the next n bytes.
func (s *streamReader) Next(n int) ([]byte, error) {
	b, err := s.Peek(n)
	if err == nil {
		s.r += n
	}
	return b, err
}

// hold notes that the slice just returned ends at end.
func (s *streamReader) hold(end int) {
	if end > s.held {
		s.held = end
	}
}

// Skip consumes n bytes, reading and dropping them a buffer at a time.
// What is dropped is read into the free space behind the unread bytes,
// never over slices already returned.
func (s *streamReader) Skip(n int) error {
	for n > 0 {
		if s.Len() == 0 {
			if err := s.fill(1); err != nil {
				return err
			}
		}
		k := min(n, s.Len())
		s.r += k
		n -= k
	}
	return nil
}

// Release lets go of what was consumed: the unread rest moves to the
// front of the buffer, invalidating the slices returned before.
func (s *streamReader) Release() error {
	s.held = 0
	if s.r == 0 {
		return nil
	}
	n := copy(s.buf, s.buf[s.r:s.w])
	s.r, s.w = 0, n
	return nil
}

// waitFrame waits, unbounded, for the first byte of the next frame; the
// caller holds no slice (it has released). A buffer grown for a large
// frame goes back to its pool, with its charge to max_buffered_bytes,
// once the peer has been idle for shrinkAfter: an idle connection holds
// only its own small buffer.
func (s *streamReader) waitFrame() error {
	if s.Len() > 0 {
		return nil
	}
	s.r, s.w, s.held = 0, 0, 0
	if len(s.buf) > streamReadMin {
		_ = s.conn.SetReadDeadline(time.Now().Add(shrinkAfter))
		s.deadline = true
		err := s.read(1)
		if s.Len() > 0 {
			return nil
		}
		if !isTimeout(err) {
			return err
		}
		s.resize(streamReadMin) // giving back is never refused
	}
	s.unbound()
	for s.Len() == 0 {
		if err := s.read(1); err != nil && s.Len() == 0 {
			return err
		}
	}
	return nil
}

// tryFill reads, for at most wait, until n bytes are unread; running out
// of time is not an error. For a peek at a throttled client's next
// request, whose relay must not block on it.
func (s *streamReader) tryFill(n int, wait time.Duration) error {
	if s.Len() >= n {
		return nil
	}
	_ = s.conn.SetReadDeadline(time.Now().Add(wait))
	s.deadline = true
	for s.Len() < n {
		if err := s.read(n); err != nil {
			if isTimeout(err) {
				return nil
			}
			return err
		}
	}
	return nil
}

// peekClose reads for at most a millisecond into the free space behind
// the unread bytes, without growing the buffer, and returns the read's
// error: how a relay that is not reading learns its peer has gone.
func (s *streamReader) peekClose() error {
	if s.w == len(s.buf) {
		return nil // no room: it will be read when the relay goes on
	}
	_ = s.conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	s.deadline = true
	k, err := s.conn.Read(s.buf[s.w:])
	s.w += k
	return err
}

// fill reads until n bytes are unread. The whole wait is bounded by
// read_timeout: a frame that has begun must arrive at a steady pace, not a
// byte at a time just inside the bound.
func (s *streamReader) fill(n int) error {
	if s.Len() >= n {
		return nil
	}
	if s.partial > 0 {
		_ = s.conn.SetReadDeadline(time.Now().Add(s.partial))
		s.deadline = true
	} else {
		s.unbound()
	}
	for s.Len() < n {
		if err := s.read(n); err != nil {
			if s.Len() >= n {
				return nil
			}
			if errors.Is(err, io.EOF) && s.Len() > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// read reads once into the free space behind the unread bytes, making
// room first, toward want unread bytes, if there is none.
func (s *streamReader) read(want int) error {
	if s.w == len(s.buf) && !s.grow(want) {
		return core.ErrOverBudget
	}
	k, err := s.conn.Read(s.buf[s.w:])
	s.w += k
	return err
}

// grow makes room to read toward n unread bytes. With no slice out since
// the last Release, the unread bytes move to the front in place; with
// nothing unread, reading goes on behind the slices out. Otherwise a new
// buffer takes the unread bytes: twice as large when n needs more (at most
// what n needs, at least streamReadMin), else the same size.
func (s *streamReader) grow(n int) bool {
	switch {
	case s.held == 0 && s.r > 0:
		s.w = copy(s.buf, s.buf[s.r:s.w])
		s.r = 0
	case s.Len() == 0 && s.held < len(s.buf):
		s.r, s.w = s.held, s.held
	}
	if s.w < len(s.buf) {
		return true
	}
	size := max(len(s.buf), streamReadMin)
	if n > size {
		size = min(2*size, n)
	}
	return s.resize(size)
}

// resize moves the unread bytes to a buffer of size bytes (the
// connection's own one for streamReadMin, else a pooled one), charging or
// giving back the difference. The buffer left goes back to its pool when
// no slice of it is out.
func (s *streamReader) resize(size int) bool {
	delta := bigCharge(size) - bigCharge(len(s.buf))
	if delta != 0 && s.charge != nil && !s.charge(delta) {
		return false
	}
	var buf []byte
	var big *[]byte
	switch {
	case size <= streamReadMin && (s.base == nil || s.held != 0 && len(s.buf) == streamReadMin):
		s.base = make([]byte, streamReadMin) // the old one has slices out
		buf = s.base
	case size <= streamReadMin:
		buf = s.base
	default:
		buf, big = getStreamBuf(size)
	}
	s.w = copy(buf, s.buf[s.r:s.w])
	if s.held == 0 {
		putStreamBuf(s.big)
	}
	s.r, s.held = 0, 0 // the old array stays with the slices out
	s.buf, s.big = buf, big
	return true
}

// bigCharge is what a buffer of n bytes charges to max_buffered_bytes: a
// connection's own streamReadMin buffer is not charged, a larger one is.
func bigCharge(n int) int {
	if n <= streamReadMin {
		return 0
	}
	return n
}

// unbound lifts the read deadline.
func (s *streamReader) unbound() {
	if s.deadline {
		_ = s.conn.SetReadDeadline(time.Time{})
		s.deadline = false
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
