package relay

import (
	"errors"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// Counter names the close counter a Fault adds to.
type Counter uint8

// Close counters a Fault can name; the connection core owns the
// collectors.
const (
	CountNone     Counter = iota
	CountProtocol         // kproxy_protocol_errors_total{kind}
	CountOversize         // kproxy_oversize_closes_total{side}
	CountOverflow         // kproxy_unread_overflow_closes_total{side}
)

// Fault is why a Kafka error closes a connection: the reason logged, the
// counter it adds to (with the protocol-error kind for CountProtocol), a
// policy rule that closed it, and whether it is an ordinary close,
// logged without its error.
type Fault struct {
	Reason string
	Count  Counter
	Kind   string
	Rule   string
	Quiet  bool
}

// Classify says what a Kafka error met while relaying from side ("client"
// or "upstream") means for the connection, whichever driver relays it,
// and false for an error that is not the Kafka session's (a socket's, a
// budget's), which the connection core classifies. A correlation
// mismatch is logged here with its ids.
func Classify(side string, err error, log *zerolog.Logger) (Fault, bool) {
	var size *framing.SizeError
	var mismatch *correlate.MismatchError
	var pc PolicyCloseError
	var unreadable SaslUnreadableError
	var addr AddressError
	var reauth ReauthError
	switch {
	case errors.As(err, &size):
		return Fault{Reason: side + " frame refused: " + size.Error(), Count: CountOversize}, true
	case errors.As(err, &mismatch):
		log.Error().Int32("upstream_id", mismatch.Got).Int32("expected_upstream_id", mismatch.Want).
			Int32("client_id", mismatch.ClientID).Msg("response does not match the oldest request in flight")
		return Fault{Reason: "correlation id mismatch", Count: CountProtocol, Kind: "correlation_mismatch"}, true
	case errors.Is(err, correlate.ErrUnexpectedResponse):
		return Fault{Reason: "upstream sent a response with nothing in flight", Count: CountProtocol, Kind: "unexpected_response"}, true
	case errors.As(err, &addr):
		f := Fault{Reason: "upstream named a broker kproxy cannot front", Count: CountProtocol, Kind: "unmapped_broker"}
		if !errors.Is(err, cluster.ErrUnmapped) {
			f.Reason = "upstream sent a response that may name brokers and kproxy cannot read"
		}
		return f, true
	case errors.As(err, &reauth):
		return Fault{Reason: "upstream re-authentication failed"}, true
	case errors.As(err, &unreadable):
		return Fault{Reason: unreadable.Error(), Count: CountProtocol, Kind: "sasl_unreadable_request"}, true
	case errors.Is(err, framing.ErrMalformed):
		return Fault{Reason: side + " sent a malformed frame", Count: CountProtocol, Kind: "malformed_" + side}, true
	case errors.As(err, &pc):
		return Fault{Reason: "policy: " + pc.Error(), Rule: pc.Verdict.Rule}, true
	case errors.Is(err, ErrOverflow):
		return Fault{Reason: side + " sent more than max_unread_bytes ahead", Count: CountOverflow}, true
	}
	return Fault{}, false
}

// Gone reports whether err only says a peer went away while a relay
// waited (the client left, the table was closed under it): an ordinary
// close.
func Gone(err error) bool {
	return errors.Is(err, ErrClientGone) || errors.Is(err, correlate.ErrClosed)
}
