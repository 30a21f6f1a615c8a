package framing

import "github.com/cloudwego/netpoll"

// Buffered reports whether r holds at least one whole frame, without
// blocking. n is the frame's full length (prefix included) when ok; a
// size error is reported as soon as the prefix is buffered.
func Buffered(r netpoll.Reader, max int) (n int, ok bool, err error) {
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
func Next(r netpoll.Reader, max int) ([]byte, error) {
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
