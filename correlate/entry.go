package correlate

import "time"

// Kind says how an entry's response will arrive.
type Kind uint8

const (
	// Forwarded: sent upstream; the response is matched by correlation id.
	Forwarded Kind = iota
	// Synthetic: answered by kproxy; Response holds the whole frame.
	Synthetic
	// RawToken: a SASL token sent after SaslHandshake v0; its answer is
	// the next upstream frame, which has no header.
	RawToken
	// Own: kproxy's own request on the connection (a SASL
	// re-authentication); its response goes to Reply, never to the
	// client.
	Own
)

// Entry is one request awaiting its response.
type Entry struct {
	Kind       Kind
	APIKey     int16
	APIVersion int16
	ClientID   int32 // the client's correlation id, restored on the response
	UpstreamID int32 // assigned by the table on Push
	Start      time.Time
	ReqBytes   int
	// SaslRounds is set on a SaslHandshake v0 request: how many raw token
	// round trips its mechanism takes (0 = unknown, see Table.Raw).
	SaslRounds int8
	// Response is the whole frame of a Synthetic entry.
	Response []byte
	// Span is the request's span, or nil when it is not traced: an opaque
	// value the table carries and never looks at, so correlate depends on
	// no tracer. Whoever sets it must leave it nil (not a typed nil) when
	// there is no span.
	Span any
	// Audit is the request's audit line awaiting its outcome, or nil: as
	// opaque to the table as Span. Whoever sets it must leave it nil (not
	// a typed nil) when there is none.
	Audit any
	// Throttle is the delay a policy put on this request, written into
	// its response's throttle_time_ms.
	Throttle time.Duration
	// Amend, when set, rewrites the response before it is written (a
	// produce whose refused partitions must be added back).
	Amend func(frame []byte) []byte
	// Reply receives a copy of the response frame of an Own entry.
	Reply chan<- []byte
}
