// This file holds the types the relay and the engine exchange: the Request
// the engine is asked about, the per-connection state it keeps in it, and
// the Verdict it answers with. They are the policy package's whole
// per-request vocabulary, apart from any one rule's logic.

package policy

import (
	"strings"
	"sync"
	"time"

	"github.com/kproxy/kproxy/framing"
)

// Outcome is what the relay does with a request.
type Outcome uint8

const (
	// Pass: relay as usual.
	Pass Outcome = iota
	// Throttle: relay, then set the response's throttle_time_ms to Delay
	// and hold the client's next requests until Delay has passed.
	Throttle
	// Reject: answer with an error response carrying Code; never forward.
	Reject
	// Close: close the connection, unanswered: a client far past what a
	// rule allows in a way no answer would slow (heartbeats over their
	// ceiling).
	Close
)

// Verdict is the decision for one request.
type Verdict struct {
	Outcome Outcome
	Code    int16
	Delay   time.Duration
	Rule    string // the rule that decided; "" for Pass
	Reason  string // why, for the log and the span event
	// Partitions, when set on a Reject of a Produce, are the only ones
	// refused: the rest of the request still goes to the broker.
	Partitions []Partition
	// Refusals, set on a Reject by a content rule (require:), are the
	// items refused, each with its own code and message; Whole says
	// nothing of the request is left to forward (RefusalResponse
	// answers it), else the relay forwards the rest (WithoutRefused)
	// and adds them to the broker's answer (WithRefusals).
	Refusals []Refusal
	Whole    bool
	// Message is the error message of a whole-request content refusal
	// (the group APIs), where the version carries one.
	Message string
	// Observed are the violations log rules saw (they change nothing);
	// Report says this request's are to be logged, the rate of log lines
	// per rule being bounded.
	Observed []Violation
	Report   bool
	// total is how many items the request has, for Whole.
	total int
}

// Request is what the engine sees of a request.
type Request struct {
	Key, Version int16
	ClientID     string // the pair caches it; no allocation per request
	Bytes        int
	Topics       *framing.TopicIDs
	Listener     string
	Conn         *ConnState
	// Records reads compressed batches for record conditions within the
	// record path's budgets; nil: a small default budget.
	Records Inflater
	// Acks is a Produce's acks when AcksRead says the relay read them
	// from the frame: an acks condition that holds then costs no decode.
	Acks     int16
	AcksRead bool
}

// ConnState holds one client connection's per-connection state: its
// buckets, and who the client is.
type ConnState struct {
	// Identity is what the connection's verified TLS client certificate
	// proves, set once before the first request and read-only after;
	// empty for none.
	Identity Identity

	mu      sync.Mutex
	engine  *Engine          // the rule set the buckets belong to
	buckets map[*rule]*meter // per rule: see connMeter
}

// Identity is what a verified TLS client certificate proves of its
// holder: its URI SANs, in certificate order (SPIFFE IDs such as
// spiffe://cluster.local/ns/payments/sa/api), and its subject CN. The two
// are kept apart: a CA that lets a requester choose the CN must not let
// the CN pass for a SPIFFE ID.
type Identity struct {
	URIs []string
	CN   string
}

// Name is the one name logged and put on spans: the first URI SAN, else
// the CN; "" for none.
func (id Identity) Name() string {
	if len(id.URIs) > 0 {
		return id.URIs[0]
	}
	return id.CN
}

// SPIFFE is the certificate's SPIFFE ID: its URI SAN when it has exactly
// one and that is a spiffe:// URI (SPIFFE allows one URI SAN; a
// certificate with more has none), else "".
func (id Identity) SPIFFE() string {
	if len(id.URIs) == 1 && strings.HasPrefix(id.URIs[0], spiffeScheme) {
		return id.URIs[0]
	}
	return ""
}

const spiffeScheme = "spiffe://"
