package framing

import "encoding/binary"

// discardChunk is how much of a refused body is waited for and dropped at
// a time, so memory held for it stays at one chunk.
const discardChunk = 64 << 10

// Stream reads the body of one frame field by field straight off the
// connection, and drops what it is not asked for as it arrives: for a
// request refused by size, which must never be buffered whole.
//
// What it has read is released as it goes, so the caller must hold no
// slice of the reader's buffer while it streams.
type Stream struct {
	r    Source
	left int // bytes of the frame not yet read
	read int // bytes read since the last release
}

// NewStream reads the next n bytes of r as one frame body.
func NewStream(r Source, n int) *Stream { return &Stream{r: r, left: n} }

// Left is how many bytes of the frame remain.
func (s *Stream) Left() int { return s.left }

// next returns the next n bytes, valid until the next call. Read bytes
// are released every discardChunk: a body of millions of small fields
// would otherwise stay buffered whole until the frame ends.
func (s *Stream) next(n int) ([]byte, error) {
	if n < 0 || n > s.left {
		return nil, malformed("field runs past the end of the frame")
	}
	if s.read >= discardChunk {
		s.r.Release()
		s.read = 0
	}
	b, err := s.r.Next(n)
	if err != nil {
		return nil, err
	}
	s.left -= n
	s.read += n
	return b, nil
}

// Int16 reads a big-endian int16.
func (s *Stream) Int16() (int16, error) {
	b, err := s.next(2)
	if err != nil {
		return 0, err
	}
	return int16(binary.BigEndian.Uint16(b)), nil
}

// Int32 reads a big-endian int32.
func (s *Stream) Int32() (int32, error) {
	b, err := s.next(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// Uvarint reads an unsigned varint.
func (s *Stream) Uvarint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := s.next(1)
		if err != nil {
			return 0, err
		}
		v |= uint64(b[0]&0x7f) << shift
		if b[0] < 0x80 {
			return v, nil
		}
	}
	return 0, malformed("varint too long")
}

// String reads n bytes as a new string (for small fields: names).
func (s *Stream) String(n int) (string, error) {
	b, err := s.next(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Discard drops n bytes as they arrive, releasing each chunk.
func (s *Stream) Discard(n int) error {
	if n < 0 || n > s.left {
		return malformed("field runs past the end of the frame")
	}
	for n > 0 {
		c := min(n, discardChunk)
		if err := s.r.Skip(c); err != nil {
			return err
		}
		s.r.Release()
		s.read = 0
		n -= c
		s.left -= c
	}
	return nil
}

// Rest drops whatever remains of the frame.
func (s *Stream) Rest() error { return s.Discard(s.left) }
