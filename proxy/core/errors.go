package core

import "errors"

// Errors a driver reports closes with. They are the transport's: the
// Kafka session's own are relay's (relay.Classify).
var (
	// ErrOverBudget: a side's input would take max_buffered_bytes past
	// its bound, and this connection holds the most.
	ErrOverBudget = errors.New("buffered bytes over max_buffered_bytes")
	// ErrSlowOverBudget closes the peer that does not take a batch
	// kproxy holds for it, when that batch is the largest charge.
	ErrSlowOverBudget = errors.New("batch waiting for a slow reader over max_buffered_bytes")
	// ErrWriteStalled: a write to that side made no progress for
	// write_timeout.
	ErrWriteStalled = errors.New("no write progress for write_timeout")
	// ErrReadTimeout marks a read that timed out inside a frame
	// (read_timeout), for a transport whose timeout is not
	// os.ErrDeadlineExceeded.
	ErrReadTimeout = errors.New("read timeout")
	// ErrPeerClosed marks a read or write that found its socket closed,
	// for a transport whose errors are not io.EOF or net.ErrClosed.
	ErrPeerClosed = errors.New("connection closed")
	// ErrPanicked: the driver's relay panicked; the connection is closed
	// and every other goes on.
	ErrPanicked = errors.New("relay panicked")
)

// ClientWriteError marks a failure to write to the client, so the close
// is blamed on the right side.
type ClientWriteError struct{ Err error }

func (e ClientWriteError) Error() string { return e.Err.Error() }
func (e ClientWriteError) Unwrap() error { return e.Err }

// UpstreamWriteError marks a failure to write to the upstream.
type UpstreamWriteError struct{ Err error }

func (e UpstreamWriteError) Error() string { return e.Err.Error() }
func (e UpstreamWriteError) Unwrap() error { return e.Err }

// Mark returns err marked as mark (ErrReadTimeout, ErrPeerClosed) for the
// close's classification, its message unchanged.
func Mark(mark, err error) error { return marked{mark, err} }

type marked struct{ mark, err error }

func (e marked) Error() string   { return e.err.Error() }
func (e marked) Unwrap() []error { return []error{e.mark, e.err} }
