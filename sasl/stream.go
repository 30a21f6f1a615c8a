package sasl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RoundTrip sends one request and returns its decoded response. kproxy
// gives one over a bare connection (initial authentication, see
// StreamRoundTrip) and one through the relay's InFlight table
// (re-authentication on a live connection, whose responses must never
// reach the client).
type RoundTrip func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)

// ClientID is the client id kproxy's own requests carry, so broker logs
// and quotas can tell them from the application's.
const ClientID = "kproxy"

// deadliner is what a net.Conn offers to bound a blocked read or write.
type deadliner interface {
	SetDeadline(time.Time) error
}

// StreamRoundTrip is a RoundTrip over a connection nothing else uses yet
// (before any client byte is relayed). It numbers its requests itself from
// 1 up, reads one size-prefixed response no larger than maxBytes (checked
// before allocating), checks its correlation id, and decodes it at the
// request's version. When conn is a net.Conn, ctx's deadline and
// cancellation bound the exchange; otherwise ctx is only checked before
// writing. Calls are serialised: the connection carries one exchange at a
// time. After an error the connection's framing is unknown: close it.
// Only a ctx's cancellation touches conn from another goroutine: give a
// connection whose SetDeadline is not safe for that (netpoll's) a ctx that
// ends only at its deadline.
func StreamRoundTrip(conn io.ReadWriter, maxBytes int) RoundTrip {
	s := &stream{conn: conn, max: maxBytes, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(ClientID))}
	return s.roundTrip
}

type stream struct {
	mu   sync.Mutex
	conn io.ReadWriter
	max  int
	f    *kmsg.RequestFormatter
	corr int32
	buf  []byte
}

func (s *stream) roundTrip(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d, ok := s.conn.(deadliner); ok {
		dl, _ := ctx.Deadline()
		if err := d.SetDeadline(dl); err != nil {
			return nil, err
		}
		// A cancellation unblocks the read by moving the deadline to
		// now. An expiry needs no move (the deadline is set already),
		// and none is made then: netpoll's SetDeadline is not safe
		// against a read in progress, and kproxy's netpoll connections
		// are only ever bounded by a deadline. The move is over before
		// the deadline is cleared again after, for the relay, so it
		// cannot land after the clear.
		moved := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(moved)
			if errors.Is(ctx.Err(), context.Canceled) {
				_ = d.SetDeadline(time.Unix(1, 0))
			}
		})
		defer func() {
			if !stop() {
				<-moved
			}
			_ = d.SetDeadline(time.Time{})
		}()
	}
	resp, err := s.exchange(req)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w (%v)", kmsg.NameForKey(req.Key()), ctx.Err(), err)
	}
	return resp, err
}

func (s *stream) exchange(req kmsg.Request) (kmsg.Response, error) {
	name := kmsg.NameForKey(req.Key())
	s.corr++
	corr := s.corr
	s.buf = s.f.AppendRequest(s.buf[:0], req, corr)
	if _, err := s.conn.Write(s.buf); err != nil {
		return nil, fmt.Errorf("writing %s request: %w", name, err)
	}

	var head [8]byte // size, correlation id
	if _, err := io.ReadFull(s.conn, head[:4]); err != nil {
		return nil, fmt.Errorf("reading %s response: %w", name, closedErr(err))
	}
	size := int32(binary.BigEndian.Uint32(head[:4]))
	switch {
	case head[0] == 0x15 && head[1] == 0x03:
		return nil, fmt.Errorf("reading %s response: the broker answered with a TLS alert: the port speaks TLS and kproxy does not (set tls.upstream)", name)
	case size < 4:
		return nil, fmt.Errorf("reading %s response: invalid size %d", name, size)
	case int(size) > s.max:
		return nil, fmt.Errorf("reading %s response: size %d is over the %d bytes limit", name, size, s.max)
	}
	if _, err := io.ReadFull(s.conn, head[4:]); err != nil {
		return nil, fmt.Errorf("reading %s response: %w", name, closedErr(err))
	}
	if got := int32(binary.BigEndian.Uint32(head[4:])); got != corr {
		return nil, fmt.Errorf("reading %s response: correlation id %d, want %d", name, got, corr)
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(s.conn, body); err != nil {
		return nil, fmt.Errorf("reading %s response: %w", name, closedErr(err))
	}

	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	// Response header v1 (flexible) has a tag section; ApiVersions
	// answers always use header v0.
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		rest, err := skipTags(body)
		if err != nil {
			return nil, fmt.Errorf("reading %s response header: %w", name, err)
		}
		body = rest
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %s v%d response: %w", name, req.GetVersion(), err)
	}
	return resp, nil
}

// closedErr says in words what an EOF at this point means.
func closedErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("the broker closed the connection (%w)", err)
	}
	return err
}

// skipTags steps over a tagged-field section (uvarint count, then per field
// uvarint tag, uvarint size and the bytes) and returns what follows it.
func skipTags(b []byte) ([]byte, error) {
	n, err := uvarint(&b)
	if err != nil {
		return nil, err
	}
	for ; n > 0; n-- {
		if _, err := uvarint(&b); err != nil {
			return nil, err
		}
		size, err := uvarint(&b)
		if err != nil {
			return nil, err
		}
		if size > uint64(len(b)) {
			return nil, errors.New("a tagged field runs past the end of the response")
		}
		b = b[size:]
	}
	return b, nil
}

func uvarint(b *[]byte) (uint64, error) {
	v, n := binary.Uvarint(*b)
	if n <= 0 || v > math.MaxInt32 {
		return 0, errors.New("invalid tagged fields")
	}
	*b = (*b)[n:]
	return v, nil
}
