package relay

import (
	"github.com/kproxy/kproxy/telemetry"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/tracing"
)

// Link is what a session asks of its driver when a request cannot go on at
// once. Only Request and RefuseOversize with mayWait call it, on the
// goroutine relaying the client's requests.
type Link interface {
	// FlushUp writes and empties up, the requests batched so far: what
	// the session is about to wait for may be their responses.
	FlushUp(up *Batch) error
	// Unread is how many bytes the client has sent that are not relayed
	// yet, checked against max_unread_bytes while the session waits.
	Unread() int
	// WaitStart and WaitEnd bracket every wait, so a driver that reads
	// without back-pressure can watch the input growing meanwhile.
	WaitStart()
	WaitEnd()
	// Answer writes the answers kproxy has queued at the head of the
	// table (Session.Answers) to the client. With async set the caller may
	// not block: the driver writes them from another goroutine.
	Answer(async bool) error
	// Released says the session released the client's input mid-batch
	// (a refused frame dropped as it arrived).
	Released()
	// Gone reports whether the client has closed its side, checked while
	// the session waits: a client that leaves while its requests wait for
	// room must not keep its pair open until the broker answers.
	Gone() bool
}

// Session is one client connection and its upstream connection, as Kafka
// sees them. The request methods (Request, RefuseOversize and the
// muting ones) are called by one goroutine at a time, the client's relay;
// the response methods (Response, Answers, Written, EndSpans) by whoever
// holds the driver's lock on writing to the client.
type Session struct {
	env   *Env
	link  Link
	log   zerolog.Logger
	table *correlate.Table
	peer  *tracing.Peer // nil when tracing is off

	// Owned by the request relay: the policy state of this connection,
	// the client id as a string (a client keeps one), the time until
	// which a throttle mutes the client (unix nanoseconds), the rules a
	// batch that may not wait was admitted with.
	conn       policy.ConnState
	clientID   string
	mutedUntil int64
	rules      *policy.Engine
	in         tally // the requests of the batch being relayed
	// budget bounds what the record conditions of the request being
	// judged inflate, reset for each one.
	budget tracing.RecordBudget
	// reauth re-authenticates the upstream connection from reauthAt
	// (unix nanoseconds; 0: never), read by a driver's runner too.
	reauth   Reauth
	reauthAt atomic.Int64
	// reauthEnd and reauthTook are when the last re-authentication ended
	// and how long it held the client's requests, until a Fetch has been
	// relayed after it (shortenFetch); owned by the request side.
	reauthEnd  time.Time
	reauthTook time.Duration
	// upPrincipal is the principal kproxy logged in as (Arm), "" when it
	// does not originate SASL.
	upPrincipal string
	// client is the client's address, for audit lines.
	client string
	// lag measures this connection's consumer lag (telemetry.lag); nil
	// when off. Its own lock serves both paths.
	lag *telemetry.LagSession

	// Owned by the client writer: the responses of the batch being
	// written, and the traced ones among them, whose spans end once the
	// batch is flushed.
	out    tally
	ending []ending

	requests, responses atomic.Int64
	bytesIn, bytesOut   atomic.Int64
}

// ending is a traced response written in the current batch.
type ending struct {
	span         *tracing.Span
	key, version int16
	frame        []byte
}

// New starts the session of one connection. peer describes it to the
// tracer (nil when tracing is off).
func New(env *Env, link Link, log zerolog.Logger, peer *tracing.Peer) *Session {
	return &Session{env: env, link: link, log: log, peer: peer,
		table: correlate.New(env.Table.MaxInFlight), out: tally{responses: true}, lag: env.Lag.NewSession(env.Topics)}
}

// Stats are a session's totals, for its closing log line.
type Stats struct {
	Requests, Responses int64
	BytesIn, BytesOut   int64
}

// Stats reads the totals so far.
func (s *Session) Stats() Stats {
	return Stats{s.requests.Load(), s.responses.Load(), s.bytesIn.Load(), s.bytesOut.Load()}
}

// InFlight is how many requests await their response (kproxy's own
// answers not yet written included).
func (s *Session) InFlight() int { return s.table.Len() }

// Room reports whether n more requests fit in the table without waiting.
func (s *Session) Room(n int) bool { return s.table.Len()+n <= s.env.Table.MaxInFlight }

// Sasl reports whether the connection is in SASL v0's raw token phase, or
// may enter it: frames may then wait for the broker's answer.
func (s *Session) Sasl() bool { return s.table.Sasl() }

// Drain stops the session taking new requests (they fail with
// correlate.ErrDraining, unsent) and reports whether it started the
// drain.
func (s *Session) Drain() bool { return s.table.Drain() }

// Drained reports whether a draining session owes nothing more. The
// caller holds the client writer, so nothing is half written.
func (s *Session) Drained() bool { return s.table.Drained() }

// Close fails what is still in flight, ending its spans, and returns how
// many requests failed. kproxy's own requests (a re-authentication) are
// not the client's: never counted in flight, they are not counted failed.
func (s *Session) Close() int {
	failed := 0
	for _, e := range s.table.Close() {
		if e.Kind == correlate.Own {
			continue
		}
		auditUnknown(e)
		s.env.Tracer.Fail(spanOf(e), "kproxy.connection_closed")
		failed++
	}
	s.env.Metrics.InFlight.Sub(float64(failed))
	s.env.Metrics.Failed.Add(float64(failed))
	return failed
}

// Muted reports how long a throttle still holds this client back, 0 when
// none does. A throttle that is over is cleared.
func (s *Session) Muted(now time.Time) time.Duration {
	if s.mutedUntil == 0 {
		return 0
	}
	d := time.Duration(s.mutedUntil - now.UnixNano())
	if d <= 0 {
		s.mutedUntil = 0
		return 0
	}
	return d
}

// MayMute reports whether a throttle was set and not yet cleared by Muted.
func (s *Session) MayMute() bool { return s.mutedUntil != 0 }

// PinRules makes the requests relayed until the next PinRules use eng,
// whatever a reload puts in force meanwhile: a batch admitted to run
// without waiting was admitted for rules that never throttle. nil unpins.
func (s *Session) PinRules(eng *policy.Engine) { s.rules = eng }

// spanOf reads an entry's span.
func spanOf(e correlate.Entry) *tracing.Span {
	sp, _ := e.Span.(*tracing.Span)
	return sp
}

// withSpan sets e's span, leaving it nil (not a typed nil) when there is
// none, as correlate asks.
func withSpan(e *correlate.Entry, sp *tracing.Span) {
	if sp != nil {
		e.Span = sp
	} else {
		e.Span = nil
	}
}

// Identity is what a client's verified TLS certificate proves.
type Identity = policy.Identity

// SetIdentity gives the connection the identity its client proved (an
// mTLS certificate's names), for rules that match a principal and for
// its spans.
func (s *Session) SetIdentity(id Identity) {
	s.conn.Identity = id
	if n := id.Name(); n != "" {
		s.peer.SetPrincipal(n)
	}
}

// Start starts the session of a connection from the client at client to
// the upstream at upstream, described to the tracer by those addresses
// when tracing is on.
func Start(env *Env, link Link, log zerolog.Logger, client, upstream string) *Session {
	var peer *tracing.Peer
	if env.Tracer.On() {
		peer = tracing.NewPeer(client, upstream, env.Topics)
	}
	s := New(env, link, log, peer)
	s.client = client
	return s
}
