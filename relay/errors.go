package relay

import (
	"errors"
	"strconv"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

var (
	// ErrOverflow: the client's unread input passed max_unread_bytes
	// while its relay waited.
	ErrOverflow = errors.New("unread input over max_unread_bytes")
	// ErrClientGone: the client closed its side while its relay waited.
	ErrClientGone = errors.New("client closed while its requests waited")
	// ErrWouldWait: a frame relayed with mayWait false needed to wait (a
	// full table, a SASL answer). A driver checks for room before such a
	// batch, so this is a driver bug, and closes the connection.
	ErrWouldWait = errors.New("a frame relayed without waiting needed to wait (full in-flight table or SASL answer)")
)

// PolicyCloseError is a refusal that cannot be answered in-band (acks=0
// produce, or an API version kproxy cannot build a response for), or a
// rule's Close: the connection is closed, as a broker would.
type PolicyCloseError struct{ Verdict policy.Verdict }

func (e PolicyCloseError) Error() string {
	if e.Verdict.Outcome == policy.Close {
		return "closed by policy rule " + e.Verdict.Rule + " (" + e.Verdict.Reason + ")"
	}
	return "refused by policy rule " + e.Verdict.Rule + " (" + e.Verdict.Reason + ") and cannot be answered in-band"
}

// SaslUnreadableError is a frame that reads as a request kproxy cannot
// parse (an API key or version its kmsg does not know), sent while the
// tokens of a mechanism with unknown rounds (GSSAPI) are relayed raw. The
// broker may run it as a request, kproxy cannot judge it: the connection
// is closed.
type SaslUnreadableError struct{ Key, Version uint16 }

func (e SaslUnreadableError) Error() string {
	return "client sent a request kproxy cannot read (API key " + strconv.Itoa(int(e.Key)) + " v" +
		strconv.Itoa(int(e.Version)) + ") during SASL v0 raw tokens: kproxy cannot judge it, closed"
}

// AddressError is a response naming a broker kproxy cannot map to one of
// its listeners, or one that cannot be parsed to find out: it is not
// passed on (a real broker address would let the client bypass kproxy),
// and the connection is closed.
type AddressError struct{ Err error }

func (e AddressError) Error() string {
	return "response not passed on, so no broker address reaches the client: " + e.Err.Error()
}

func (e AddressError) Unwrap() error { return e.Err }

// failure is the error type of the span of a request that got no answer
// because of err.
func failure(err error) string {
	var pc PolicyCloseError
	switch {
	case errors.As(err, &pc):
		return "kproxy.policy_rejected"
	case errors.Is(err, framing.ErrMalformed):
		return "kproxy.malformed_request"
	}
	return "kproxy.connection_closed"
}
