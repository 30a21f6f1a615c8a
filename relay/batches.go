package relay

import (
	"errors"
	"time"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// MaxBatchBytes ends a batch so that it is flushed: a client sending
// faster than the upstream takes would otherwise keep one batch growing in
// a driver's output buffer, where neither the relay's own check nor a
// driver's watch over waiting relays sees it.
const MaxBatchBytes = 1 << 20

// RequestBatch relays the whole request frames buffered in r, waiting for
// the first one with first, up to MaxBatchBytes, then writes them
// upstream (Link.FlushUp): the request relay of a driver whose relay may
// wait. pin, when set, is told how much of r the batch holds so far. A
// frame over a rule's max_request_bytes is judged from its header and
// dropped as it arrives, never buffered whole.
func (s *Session) RequestBatch(r framing.Source, up *Batch, first func(max int) ([]byte, error), pin func(batched int)) error {
	defer func() {
		s.CountRequests() // what an error left uncounted
		up.Reset()        // an error leaves frames of a buffer about to go
	}()
	max := s.env.Framing.MaxRequestBytes
	batched := 0
	for isFirst := true; ; isFirst = false {
		if !isFirst && (r.Len() < framing.SizeLen || batched >= MaxBatchBytes) {
			break
		}
		if limit := s.env.Policies.Load().MaxFrame(); limit > 0 {
			refused, err := s.RefuseOversize(r, up, limit)
			if errors.Is(err, correlate.ErrDraining) {
				break // not sent; the connection closes once what was sent is answered
			}
			if err != nil {
				return err
			}
			if refused {
				batched = 0 // what was batched before it is flushed and released
				continue
			}
		}
		var frame []byte
		var err error
		if isFirst {
			frame, err = first(max)
		} else {
			n, whole, berr := framing.Buffered(r, max)
			if !whole || berr != nil {
				break // a size error is reported on the next call
			}
			frame, err = r.Next(n)
		}
		if err != nil {
			return err
		}
		batched += len(frame)
		if pin != nil {
			pin(batched)
		}
		if err := s.Request(frame, up, true); errors.Is(err, correlate.ErrDraining) {
			break // as above
		} else if err != nil {
			return err
		}
		if s.MayMute() && s.Muted(time.Now()) > 0 {
			break // the rest waits out the throttle
		}
	}
	return s.link.FlushUp(up)
}

// ResponseBatch relays frame, a whole response read from r, and the whole
// responses buffered behind it, up to MaxBatchBytes, into out. The caller
// holds the client writer and writes out. pin, when set, is told how much
// of r the batch holds so far.
func (s *Session) ResponseBatch(r framing.Source, frame []byte, out *Batch, pin func(batched int)) error {
	max := s.env.Framing.MaxResponseBytes
	batched := len(frame)
	for {
		if err := s.Response(frame, out); err != nil {
			return err
		}
		n, whole, berr := framing.Buffered(r, max)
		if !whole || berr != nil || batched >= MaxBatchBytes {
			return nil // a size error is reported on the next call
		}
		var err error
		if frame, err = r.Next(n); err != nil {
			return err
		}
		batched += len(frame)
		if pin != nil {
			pin(batched)
		}
	}
}
