package framing

// Source is a connection's buffered input as the framing functions read
// it: netpoll's Reader satisfies it, and so does the buffered reader the
// TLS driver keeps over an io.Reader. Slices returned by Peek and Next
// stay valid until Release.
type Source interface {
	// Len is how many bytes are buffered, readable without waiting.
	Len() int
	// Peek returns the next n bytes without consuming them, waiting for
	// them if need be.
	Peek(n int) ([]byte, error)
	// Next returns and consumes the next n bytes, waiting if need be.
	Next(n int) ([]byte, error)
	// Skip consumes n bytes, waiting if need be.
	Skip(n int) error
	// Release gives back the memory of what has been consumed.
	Release() error
}

// Buffered reports whether r holds at least one whole frame, without
// blocking. n is the frame's full length (prefix included) when ok; a
// size error is reported as soon as the prefix is buffered.
func Buffered(r Source, max int) (n int, ok bool, err error) {
	have := r.Len()
	if have < SizeLen {
		return 0, false, nil
	}
	p, err := r.Peek(SizeLen)
	if err != nil {
		return 0, false, err
	}
	size, err := CheckSize(p, max)
	if err != nil {
		return 0, false, err
	}
	return SizeLen + size, have >= SizeLen+size, nil
}

// Next returns the next whole frame, prefix included, blocking until it has
// arrived or the reader's timeout fires. The size is checked before the body
// is waited for. The slice is valid until r.Release.
func Next(r Source, max int) ([]byte, error) {
	p, err := r.Peek(SizeLen)
	if err != nil {
		return nil, err
	}
	size, err := CheckSize(p, max)
	if err != nil {
		return nil, err
	}
	return r.Next(SizeLen + size)
}
