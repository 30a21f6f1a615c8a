package proxy

import (
	"errors"
	"io"
	"net"
	"time"
)

// streamReadMin is a stream reader's first buffer, and the least it asks
// the connection for in one read.
const streamReadMin = 16 << 10

// streamReader is framing.Source over a net.Conn (a tls.Conn, or a plain
// one paired with TLS): the TLS driver's counterpart of netpoll's Reader.
// Unlike netpoll it reads only when asked for more than it holds, so a
// peer that outruns kproxy is held back by TCP, not buffered. Slices it
// returns stay valid until Release, which moves what is left unread to
// the front of the buffer; growing the buffer copies only the unread
// bytes, and the old array stays alive for the slices already returned.
type streamReader struct {
	conn net.Conn
	buf  []byte
	r, w int // unread input is buf[r:w]
	// partial bounds the wait for the rest of a frame begun (0: none);
	// between frames a reader waits as long as the peer stays idle.
	partial time.Duration
	// grow is told of each growth of the buffer, from size old to new,
	// to charge it to max_buffered_bytes; false refuses it.
	grow func(old, new int) bool
	// deadline is set while the connection's read deadline is.
	deadline bool
}

var errStreamBudget = errors.New("buffered bytes over max_buffered_bytes")

func newStreamReader(c net.Conn, partial time.Duration, grow func(old, new int) bool) *streamReader {
	return &streamReader{conn: c, partial: partial, grow: grow}
}

// Len is how many bytes are buffered and unread.
func (s *streamReader) Len() int { return s.w - s.r }

// Peek returns the next n bytes, reading until they have arrived.
func (s *streamReader) Peek(n int) ([]byte, error) {
	if err := s.fill(n); err != nil {
		return nil, err
	}
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

// Skip consumes n bytes, reading and dropping them a buffer at a time.
func (s *streamReader) Skip(n int) error {
	for n > 0 {
		if s.Len() == 0 {
			s.r, s.w = 0, 0 // nothing unread: the whole buffer is free
			if err := s.fill(min(n, max(len(s.buf), streamReadMin))); err != nil {
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
	if s.r == 0 {
		return nil
	}
	n := copy(s.buf, s.buf[s.r:s.w])
	s.r, s.w = 0, n
	return nil
}

// fill reads until n bytes are unread, growing the buffer if they cannot
// fit behind what was consumed and not released.
func (s *streamReader) fill(n int) error {
	if s.Len() >= n {
		return nil
	}
	if s.r+n > len(s.buf) {
		if err := s.resize(n); err != nil {
			return err
		}
	}
	for s.Len() < n {
		s.setDeadline()
		k, err := s.conn.Read(s.buf[s.w:])
		s.w += k
		if err != nil {
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

// resize makes room for n unread bytes behind what was consumed and not
// released: in a new buffer, since the slices returned from the old one
// stay valid until Release. It grows only when n does not fit at all, so
// a steady stream of frames, read after each Release from the front of
// the buffer, allocates nothing.
func (s *streamReader) resize(n int) error {
	size := len(s.buf)
	if size < n {
		size = max(n, 2*size, streamReadMin)
		if s.grow != nil && !s.grow(len(s.buf), size) {
			return errStreamBudget
		}
	}
	buf := make([]byte, size)
	s.w = copy(buf, s.buf[s.r:s.w])
	s.r = 0
	s.buf = buf
	return nil
}

// setDeadline bounds the read when a frame has begun (read_timeout) and
// lifts the bound between frames.
func (s *streamReader) setDeadline() {
	want := s.partial > 0 && s.Len() > 0
	switch {
	case want:
		_ = s.conn.SetReadDeadline(time.Now().Add(s.partial))
		s.deadline = true
	case s.deadline:
		_ = s.conn.SetReadDeadline(time.Time{})
		s.deadline = false
	}
}
