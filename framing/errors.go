package framing

import (
	"errors"
	"fmt"
)

// ErrMalformed marks a header that cannot be parsed. The connection that
// sent it cannot be trusted to stay in frame and is closed.
var ErrMalformed = errors.New("malformed kafka header")

// SizeError is returned for a size prefix that no Kafka peer would send. It
// says what the first bytes look like, because the usual cause is a client
// speaking the wrong protocol to the port, not a broken Kafka client.
type SizeError struct {
	Size  int32
	Max   int
	Looks string // "TLS ClientHello", "HTTP request", or ""
}

func (e *SizeError) Error() string {
	if e.Looks != "" {
		return fmt.Sprintf("not kafka: first bytes look like a %s (size prefix %d); is the client using the wrong protocol or port?", e.Looks, e.Size)
	}
	if e.Size < 0 {
		return fmt.Sprintf("negative frame size %d", e.Size)
	}
	return fmt.Sprintf("frame size %d exceeds limit %d", e.Size, e.Max)
}

func malformed(what string) error { return fmt.Errorf("%w: %s", ErrMalformed, what) }
