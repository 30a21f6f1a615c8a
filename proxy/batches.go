package proxy

import (
	"errors"
	"time"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/relay"
)

// relayRequestBatch relays the whole request frames buffered in r through
// sess, waiting for the first one with first, up to maxBatchBytes, then
// writes them upstream with flushUp, for a driver whose relay may wait.
// pin is told how much of r the batch holds so far. A frame over a rule's
// max_request_bytes is judged from its header and dropped as it arrives.
func relayRequestBatch(sess *relay.Session, s *Server, r framing.Source, up *relay.Batch,
	flushUp func(*relay.Batch) error, first func(max int) ([]byte, error), pin func(batched int)) error {
	defer func() {
		sess.CountRequests() // what an error left uncounted
		up.Reset()           // an error leaves frames of a buffer about to go
	}()
	max := s.framing.MaxRequestBytes
	batched := 0
	for isFirst := true; ; isFirst = false {
		if !isFirst && (r.Len() < framing.SizeLen || batched >= maxBatchBytes) {
			break
		}
		if limit := s.policies.Load().MaxFrame(); limit > 0 {
			refused, err := sess.RefuseOversize(r, up, limit)
			if errors.Is(err, correlate.ErrDraining) {
				break // not sent; the pair closes once what was sent is answered
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
		if err := sess.Request(frame, up, true); errors.Is(err, correlate.ErrDraining) {
			break // as above
		} else if err != nil {
			return err
		}
		if sess.MayMute() && sess.Muted(time.Now()) > 0 {
			break // the rest waits out the throttle
		}
	}
	s.m.batch[batchRequests][inPool].Inc()
	return flushUp(up)
}

// relayResponseBatch relays frame, a whole response read from r, and the
// whole responses buffered behind it, up to maxBatchBytes, into out. The
// caller holds the client writer and writes out. pin is told how much of
// r the batch holds so far.
func relayResponseBatch(sess *relay.Session, s *Server, r framing.Source, frame []byte, out *relay.Batch, pin func(batched int)) error {
	max := s.framing.MaxResponseBytes
	batched := len(frame)
	defer s.m.batch[batchResponses][inPool].Inc()
	for {
		if err := sess.Response(frame, out); err != nil {
			return err
		}
		n, whole, berr := framing.Buffered(r, max)
		if !whole || berr != nil || batched >= maxBatchBytes {
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
