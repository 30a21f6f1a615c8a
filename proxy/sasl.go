package proxy

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/correlate"
)

// saslToken reports whether a client frame is a raw SASL token (v0 flow).
// A frame behind a SaslHandshake v0 or token the broker has not answered
// yet is held, and the client not read further, until that answer has been
// relayed: only then is it known whether the broker takes the frame for a
// token or a request, and a request must pass the rules and be counted and
// traced like any other. What was relayed before it is flushed first, since
// the answer waits on it.
func (p *pair) saslToken(frame []byte, r netpoll.Reader, w netpoll.Writer) (bool, error) {
	for {
		kind, retired := p.table.Frame(frame)
		p.in.inFlight -= int64(retired) // tokens never to be answered
		switch kind {
		case correlate.FrameRequest:
			return false, nil
		case correlate.FrameToken:
			return true, nil
		case correlate.FrameUnreadable:
			return false, errSaslUnreadable{binary.BigEndian.Uint16(frame[4:]), binary.BigEndian.Uint16(frame[6:])}
		}
		if p.inClient { // clientInline keeps the SASL phase off the poller
			return false, errInlineSasl
		}
		if err := p.awaitAnswer(r, w); err != nil {
			return false, err
		}
	}
}

// awaitAnswer flushes what was relayed and waits until the answer a held
// frame depends on has been relayed, checking the unread input against
// max_unread_bytes meanwhile, as a full table does.
func (p *pair) awaitAnswer(r netpoll.Reader, w netpoll.Writer) error {
	if err := p.flushUp(w); err != nil {
		return errUpstreamWrite{err}
	}
	for {
		p.waitStart()
		err := p.table.WaitAnswered(backpressurePoll)
		p.waitEnd()
		switch err {
		case nil:
			return nil
		case correlate.ErrAwaitingAnswer:
			if r.Len() > p.s.cfg.MaxUnreadBytes {
				return errOverflow
			}
		default:
			return err
		}
	}
}

var errInlineSasl = errors.New("SASL frame reached a batch relayed on the poller")

// errSaslUnreadable is a frame that reads as a request kproxy cannot parse
// (an API key or version its kmsg does not know), sent while the tokens of
// a mechanism with unknown rounds (GSSAPI) are relayed raw. The broker may
// run it as a request, kproxy cannot judge it: the connection is closed.
type errSaslUnreadable struct{ key, version uint16 }

func (e errSaslUnreadable) Error() string {
	return "client sent a request kproxy cannot read (API key " + strconv.Itoa(int(e.key)) + " v" +
		strconv.Itoa(int(e.version)) + ") during SASL v0 raw tokens: kproxy cannot judge it, closed"
}
