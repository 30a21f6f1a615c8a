package relay

import (
	"github.com/kproxy/kproxy/audit"
	"sync/atomic"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/telemetry"
	"github.com/kproxy/kproxy/tracing"
)

// Env is what every session of one listener shares.
type Env struct {
	Framing framing.Config
	Table   correlate.Config
	Metrics *Metrics
	Tracer  *tracing.Tracer // nil or off: no spans
	// Topics are the topic ids learnt from Metadata responses, for rules
	// and spans that name topics.
	Topics *framing.TopicIDs
	// Policies is the rule set in force; a reload swaps it, and sessions
	// apply it from their next request.
	Policies *atomic.Pointer[policy.Engine]
	// Listener is the proxy.listen address, as rules match it.
	Listener string
	// Addresses, in cluster mode, rewrites the broker addresses of
	// responses to kproxy's own listeners (cluster.Fronting); nil when
	// kproxy fronts one broker, which costs the relay nothing.
	Addresses AddressRewriter
	// Originating is set when kproxy authenticates to the broker itself
	// (sasl.upstream): a client's own SaslHandshake and SaslAuthenticate
	// are answered ILLEGAL_SASL_STATE, and the APIs in Hidden are left
	// out of the ApiVersions answers clients see.
	Originating bool
	Hidden      []int16
	// Origination, when set, logs every new upstream connection in
	// (see Originate).
	Origination Origination
	// MaxUnread is max_unread_bytes: a session waiting (full table, SASL
	// answer) fails with ErrOverflow when the client's unread input
	// passes it.
	MaxUnread int
	// Rack, when set (proxy.client_rack), fills the rack_id of Fetch
	// requests whose client left it empty.
	Rack *Rack
	// Lag, when set (telemetry.lag.enabled), measures consumer lag from
	// Fetch requests and responses.
	Lag *telemetry.Lag
	// Clients, when set (telemetry.clients.enabled), answers the client
	// telemetry APIs (KIP-714) in the broker's place and exports what
	// clients push.
	Clients *telemetry.Clients
	// Audit, when set, writes a line for every request that changes
	// cluster state and every policy refusal (audit.enabled).
	Audit *audit.Log
}

// readsTopics reports whether anything needs topic names: the tracer, a
// rule set, or the lag table (Fetch v13+ names topics by id).
func (e *Env) readsTopics() bool {
	return e.Tracer.On() || !e.Policies.Load().Empty() || e.Lag != nil
}

// AddressRewriter gives the response frame a client may see: frame itself
// when it names no broker, else a copy with kproxy's addresses. An error
// means the frame must not reach the client. Passes says whether a
// request of key may be relayed at all (its answer names no address, or
// one Rewrite rewrites); Hidden are the refused keys, left out of
// ApiVersions.
type AddressRewriter interface {
	Rewrite(frame []byte, key, version int16) ([]byte, error)
	Passes(key int16) bool
	Hidden() []int16
}

// hidden are the API keys left out of the ApiVersions answers clients
// see: origination's and cluster mode's refusals.
func (e *Env) hidden() []int16 {
	if e.Addresses == nil {
		return e.Hidden
	}
	return append(append([]int16(nil), e.Hidden...), e.Addresses.Hidden()...)
}

// Originate makes kproxy authenticate every upstream connection itself
// with o: clients' own SASL is refused and o's hidden APIs are left out
// of ApiVersions.
func (e *Env) Originate(o Origination) {
	e.Origination, e.Originating, e.Hidden = o, true, o.Hidden()
}

// RuleClosed counts a connection that rule closed (a refusal that could
// not be answered in-band).
func (e *Env) RuleClosed(rule string) {
	if eng := e.Policies.Load(); eng != nil {
		eng.Closed(rule)
	}
}
