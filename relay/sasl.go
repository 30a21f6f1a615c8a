package relay

import (
	"encoding/binary"
	"time"

	"github.com/kproxy/kproxy/correlate"
)

// backpressurePoll is how often a session waiting on the table (for room,
// or for a SASL answer) checks the client's unread input against
// max_unread_bytes.
const backpressurePoll = 100 * time.Millisecond

// saslToken reports whether a client frame is a raw SASL token (v0 flow).
// A frame behind a SaslHandshake v0 or token the broker has not answered
// yet is held, and the client not read further, until that answer has been
// relayed: only then is it known whether the broker takes the frame for a
// token or a request, and a request must pass the rules and be counted and
// traced like any other. What was relayed before it is flushed first, since
// the answer waits on it.
func (s *Session) saslToken(frame []byte, up *Batch, mayWait bool) (bool, error) {
	for {
		kind, retired := s.table.Frame(frame)
		s.in.inFlight -= int64(retired) // tokens never to be answered
		switch kind {
		case correlate.FrameRequest:
			return false, nil
		case correlate.FrameToken:
			return true, nil
		case correlate.FrameUnreadable:
			return false, SaslUnreadableError{binary.BigEndian.Uint16(frame[4:]), binary.BigEndian.Uint16(frame[6:])}
		}
		if !mayWait { // a driver keeps the SASL phase to relays that may wait
			return false, ErrWouldWait
		}
		if err := s.awaitAnswer(up); err != nil {
			return false, err
		}
	}
}

// awaitAnswer flushes what was relayed and waits until the answer a held
// frame depends on has been relayed, checking the unread input against
// max_unread_bytes meanwhile, as a full table does.
func (s *Session) awaitAnswer(up *Batch) error {
	s.CountRequests()
	if err := s.link.FlushUp(up); err != nil {
		return err
	}
	for {
		s.link.WaitStart()
		err := s.table.WaitAnswered(backpressurePoll)
		s.link.WaitEnd()
		switch err {
		case nil:
			return nil
		case correlate.ErrAwaitingAnswer:
			if s.link.Unread() > s.env.MaxUnread {
				return ErrOverflow
			}
		default:
			return err
		}
	}
}
