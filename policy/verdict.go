// This file holds the types the relay and the engine exchange: the Request
// the engine is asked about, the per-connection state it keeps in it, and
// the Verdict it answers with. They are the policy package's whole
// per-request vocabulary, apart from any one rule's logic.

package policy

import (
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
}

// Request is what the engine sees of a request.
type Request struct {
	Key, Version int16
	ClientID     string // the pair caches it; no allocation per request
	Bytes        int
	Topics       *framing.TopicIDs
	Listener     string
	Conn         *ConnState
}

// ConnState holds one client connection's per-connection state: its
// buckets, and who the client is.
type ConnState struct {
	// Principals are the identities of the connection's verified TLS
	// client certificate (tlsconf.Identities), set once by the driver
	// before the first request and read-only after; nil for none.
	Principals []string

	mu      sync.Mutex
	engine  *Engine // the rule set the buckets belong to
	buckets map[*rule]*meter
}
