package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// RoundTrip sends one of kproxy's own requests on the session's upstream
// connection and returns its decoded response.
type RoundTrip func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)

// Reauth re-authenticates the session's upstream connection through rt
// (SaslHandshake and SaslAuthenticate as kproxy's own requests) and says
// when to do it next (zero: never again). The driver makes it from the
// SASL originator and the connection's last authentication.
type Reauth func(ctx context.Context, rt RoundTrip) (next time.Time, err error)

// reauthTimeout bounds one re-authentication once the connection is idle.
const reauthTimeout = 30 * time.Second

// ReauthError is a re-authentication that failed: the connection is
// closed, as the broker would close it once the session expires.
type ReauthError struct{ Err error }

func (e ReauthError) Error() string { return "upstream re-authentication failed: " + e.Err.Error() }
func (e ReauthError) Unwrap() error { return e.Err }

// SetReauth arms the re-authentication of the upstream connection at at
// (zero: never), done by fn. The driver calls it before the relay starts.
func (s *Session) SetReauth(at time.Time, fn Reauth) {
	s.reauth = fn
	s.setReauthAt(at)
}

func (s *Session) setReauthAt(at time.Time) {
	if at.IsZero() {
		s.reauthAt.Store(0)
		return
	}
	s.reauthAt.Store(at.UnixNano())
}

// ReauthDue reports whether the upstream connection must re-authenticate
// before the next request: a driver relays such a batch where it may
// wait, never on the poller. Without re-authentication it reads no clock.
func (s *Session) ReauthDue() bool {
	at := s.reauthAt.Load()
	return at != 0 && time.Now().UnixNano() >= at
}

// ReauthAt is when the upstream connection must next re-authenticate;
// zero when never.
func (s *Session) ReauthAt() time.Time {
	if at := s.reauthAt.Load(); at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}

// Reauthenticate re-authenticates the upstream connection now if it is
// due, up being the driver's upstream batch: for a driver's timer, so a
// connection whose client is idle (or muted by a throttle) renews its
// session before the broker's ends, without waiting for a request. The
// caller holds the request side, as a request relay does.
//
// It does nothing while any request awaits its answer: waiting there
// would hold the client's next request behind a long one (a Fetch's
// max wait, a JoinGroup) for as long as that takes, and clients give up
// such a connection. The timer looks again shortly, and a request that
// comes meanwhile re-authenticates first, once the table is empty.
func (s *Session) Reauthenticate(up *Batch) error {
	if s.reauth == nil || !s.ReauthDue() || s.table.Len() > 0 {
		return nil
	}
	return s.reauthenticate(up)
}

// reauthenticate holds the client's requests back (as a throttle does),
// waits until every request sent is answered, re-authenticates the
// upstream connection with kproxy's own requests, whose answers never
// reach the client, and lets the client go on.
func (s *Session) reauthenticate(up *Batch) error {
	start := time.Now() // the client's requests are held from here
	s.CountRequests()
	if err := s.link.FlushUp(up); err != nil {
		return err
	}
	for {
		s.link.WaitStart()
		err := s.table.WaitEmpty(backpressurePoll)
		s.link.WaitEnd()
		if err == nil {
			break
		}
		if err != correlate.ErrBusy {
			return err
		}
		if err := s.waitBounds(); err != nil {
			return err
		}
	}
	if s.table.Drained() {
		// A drain began meanwhile: the connection closes now that every
		// answer is in, and this request is not sent. Re-authenticating
		// would fail on the draining table and be counted as a failed
		// authentication, turning readiness false for a drain.
		return correlate.ErrDraining
	}
	ctx, cancel := context.WithTimeout(context.Background(), reauthTimeout)
	defer cancel()
	next, err := s.reauth(ctx, func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		frame, err := s.ownExchange(ctx, req)
		if err != nil {
			if ctx.Err() == nil {
				// The connection ended (closed, drained, the client
				// left) before the broker answered: the authentication
				// is cancelled, which says nothing about the
				// credentials, rather than failed.
				cancel()
			}
			return nil, err
		}
		return decodeOwn(req, frame)
	})
	if err != nil {
		return ReauthError{err}
	}
	s.setReauthAt(next)
	s.reauthEnd = time.Now()
	s.reauthTook = s.reauthEnd.Sub(start)
	s.log.Debug().Time("next", next).Dur("took", s.reauthTook).Msg("upstream re-authenticated")
	return nil
}

// shortenFetch takes the time a re-authentication held the Fetch in frame
// off the wait it asks the broker for, so its answer comes when the client
// expects it rather than that much later: clients time a Fetch out soon
// after its wait (kafka-go gives up at its MaxWait, having asked the
// broker for a quarter less), and a re-authentication costs round trips
// to the broker. It serves the first Fetch relayed after a
// re-authentication, and only one relayed within that re-authentication's
// duration of its end: it waited behind it (the request that ran it, or
// requests that came while the timer's ran), for at most that long. An
// answer that comes a little early is an empty fetch the client repeats;
// one that comes late is a connection the client drops.
func (s *Session) shortenFetch(frame []byte, h framing.RequestHeader) {
	held := s.reauthTook
	s.reauthTook = 0
	if held < time.Millisecond || time.Since(s.reauthEnd) >= held {
		return
	}
	if left, ok := framing.ShortenFetchWait(frame, h, held); ok {
		s.log.Debug().Dur("held", held).Int32("max_wait_ms", left).Msg("fetch held by a re-authentication: its wait shortened")
	}
}

// waitBounds ends a wait whose client sent too much meanwhile or left.
func (s *Session) waitBounds() error {
	if s.link.Unread() > s.env.MaxUnread {
		return ErrOverflow
	}
	if s.link.Gone() {
		return ErrClientGone
	}
	return nil
}

// ownFormatter frames kproxy's own requests.
var ownFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("kproxy"))

// ownExchange sends req as kproxy's own entry in the table and waits for
// its answer's frame, which Response hands over instead of relaying it.
func (s *Session) ownExchange(ctx context.Context, req kmsg.Request) ([]byte, error) {
	reply := make(chan []byte, 1)
	id, err := s.table.Push(correlate.Entry{Kind: correlate.Own, APIKey: req.Key(), APIVersion: req.GetVersion(),
		Start: time.Now(), Reply: reply})
	if err != nil {
		return nil, err
	}
	b := Batch{ownFormatter.AppendRequest(nil, req, id)}
	if err := s.link.FlushUp(&b); err != nil {
		return nil, err
	}
	tick := time.NewTicker(backpressurePoll)
	defer tick.Stop()
	for {
		s.link.WaitStart()
		var frame []byte
		select {
		case frame = <-reply:
		case <-ctx.Done():
		case <-tick.C:
		}
		s.link.WaitEnd()
		switch {
		case frame != nil:
			return frame, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("no answer to %s: %w", kmsg.NameForKey(req.Key()), ctx.Err())
		case s.table.Closed():
			return nil, correlate.ErrClosed
		}
		if err := s.waitBounds(); err != nil {
			return nil, err
		}
	}
}

// decodeOwn reads the answer to one of kproxy's own requests.
func decodeOwn(req kmsg.Request, frame []byte) (kmsg.Response, error) {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	off := framing.SizeLen + 4
	if framing.ResponseHeaderVersion(req.Key(), req.GetVersion()) == 1 {
		off = skipTags(frame, off)
	}
	if off < 0 || off > len(frame) {
		return nil, errors.New("own response: shorter than its header")
	}
	if err := resp.ReadFrom(frame[off:]); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// skipTags steps over a tagged-field section at off, or returns -1.
func skipTags(b []byte, off int) int {
	uv := func() uint64 {
		if off < 0 || off >= len(b) {
			off = -1
			return 0
		}
		v, n := binary.Uvarint(b[off:])
		if n <= 0 {
			off = -1
			return 0
		}
		off += n
		return v
	}
	for n := uv(); n > 0 && off >= 0; n-- {
		uv()
		size := uv()
		if off < 0 || size > uint64(len(b)-off) {
			return -1
		}
		off += int(size)
	}
	return off
}
