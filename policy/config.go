package policy

import (
	"fmt"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/fielderr"
)

// Config is the `policies:` section of kproxy.yaml: rules checked in order
// against every request.
type Config struct {
	Rules []Rule `yaml:"rules"`
}

// Rule selects requests and says what to do with them.
type Rule struct {
	// Name identifies the rule in logs, metrics and span events.
	Name string `yaml:"name"`
	// Match selects the requests the rule applies to; empty matches all.
	Match Selector `yaml:"match"`
	// Limits, when set, make the rule act only on requests over them; a
	// rule with no limits acts on every request it matches (an access
	// rule).
	Limits Limits `yaml:"limits"`
	// Require, when set, makes the rule act only on requests that break
	// one of its conditions on their content (see Require).
	Require *Require `yaml:"require"`
	// Action is reject (answer with a Kafka error, never forward),
	// throttle (forward, then delay the client the way a broker quota
	// does) or log (record what would have happened).
	Action string `yaml:"action"`
}

// Selector matches requests. Every field set must match.
type Selector struct {
	// ClientID is an exact client.id or a glob ("app-*"; see glob for
	// the syntax, the same for topics).
	ClientID string `yaml:"client_id"`
	// APIs are Kafka API names (Produce, Fetch, DeleteTopics, CreateAcls).
	APIs []string `yaml:"apis"`
	// Topics are topic globs; a request matches when any topic it names
	// matches. Topic rules decode the request body (once, shared with the
	// tracer).
	Topics []string `yaml:"topics"`
	// ExceptAPIs and ExceptTopics turn the lists around, for allow-lists:
	// a rule with except_apis matches every API not listed (APIs kproxy
	// does not know included); with except_topics, a request naming a
	// topic that no glob there matches.
	ExceptAPIs   []string `yaml:"except_apis"`
	ExceptTopics []string `yaml:"except_topics"`
	// Listener is the proxy.listen address the request arrived on; in
	// cluster mode node ports count as proxy.listen, so a rule cannot be
	// bypassed through one.
	Listener string `yaml:"listener"`
	// Principal is a glob over the identity of the connection's verified
	// TLS client certificate (tls.listener with client_ca_file). A
	// spiffe:// glob ("spiffe://cluster.local/ns/payments/*") matches the
	// certificate's SPIFFE ID only: its one URI SAN, never the CN, and
	// nothing of a certificate with more than one URI SAN. Any other glob
	// matches what principal_source says. It never matches a connection
	// with no identity (plaintext, or no client certificate): a rule
	// keyed on who the client is fails closed for a client that did not
	// say.
	Principal string `yaml:"principal"`
	// ExceptPrincipals turns principal around, for allow-lists by
	// identity: the rule matches a connection none of whose identities
	// any glob there matches, a connection with no identity included
	// (it is in no list), so "only payments may delete topics" refuses
	// anonymous clients too.
	ExceptPrincipals []string `yaml:"except_principals"`
	// PrincipalSource says which names of the certificate the globs of
	// principal and except_principals that are not spiffe:// match: uri
	// (its URI SANs), cn (its subject CN) or any (both); empty, the
	// default, is its URI SANs when it has any, else its CN, so a CN
	// never stands in for a URI SAN the certificate has.
	PrincipalSource string `yaml:"principal_source"`
}

// The values of match.principal_source.
const (
	SourceURI = "uri"
	SourceCN  = "cn"
	SourceAny = "any"
)

// Limits make a rule act only on requests over them.
type Limits struct {
	// MaxRequestBytes bounds the whole request frame.
	MaxRequestBytes int `yaml:"max_request_bytes"`
	// MaxBatchBytes and MaxBatchRecords bound each partition's batch in a
	// Produce: the partitions over them are refused with MESSAGE_TOO_LARGE
	// and the others still go to the broker.
	MaxBatchBytes   int `yaml:"max_batch_bytes"`
	MaxBatchRecords int `yaml:"max_batch_records"`
	// RequestsPerSecond and BytesPerSecond are token buckets holding one
	// second's worth.
	RequestsPerSecond float64 `yaml:"requests_per_second"`
	BytesPerSecond    float64 `yaml:"bytes_per_second"`
	// Key says whose traffic a bucket counts: client_id (default),
	// connection, rule (all matching traffic together), or topic (the
	// bytes produced to each topic, whoever sends them).
	Key string `yaml:"key"`
}

// Actions.
const (
	ActionReject   = "reject"
	ActionThrottle = "throttle"
	ActionLog      = "log"
)

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config { return Config{} }

// Validate reports the first invalid field, with its path in the section.
func (c Config) Validate() error {
	seen := map[string]bool{}
	for i, r := range c.Rules {
		at := fmt.Sprintf("rules.%d.", i)
		switch {
		case r.Name == "":
			return fielderr.New(at+"name", "is required")
		case seen[r.Name]:
			return fielderr.New(at+"name", fmt.Sprintf("%q is used by an earlier rule", r.Name))
		case r.Action != ActionReject && r.Action != ActionThrottle && r.Action != ActionLog:
			return fielderr.New(at+"action", "must be reject, throttle or log")
		case r.Limits.RequestsPerSecond < 0 || r.Limits.BytesPerSecond < 0:
			return fielderr.New(at+"limits", "rates must not be negative")
		case r.Limits.MaxRequestBytes < 0 || r.Limits.MaxBatchBytes < 0 || r.Limits.MaxBatchRecords < 0:
			return fielderr.New(at+"limits", "sizes must not be negative")
		case r.Action == ActionThrottle && !r.Limits.rates():
			return fielderr.New(at+"action", "throttle needs a rate in limits")
		case r.Limits.rates() && r.Limits.sizes():
			return fielderr.New(at+"limits", "put rates and sizes in separate rules")
		}
		switch r.Limits.Key {
		case "", "client_id", "connection", "rule", "topic":
		default:
			return fielderr.New(at+"limits.key", "must be client_id, connection, rule or topic")
		}
		if err := checkGlob(r.Match.ClientID); err != nil {
			return fielderr.New(at+"match.client_id", "bad glob: "+err.Error())
		}
		switch r.Match.PrincipalSource {
		case "", SourceURI, SourceCN, SourceAny:
		default:
			return fielderr.New(at+"match.principal_source", "must be uri, cn or any (empty: URI SANs when the certificate has them, else the CN)")
		}
		if err := checkGlob(r.Match.Principal); err != nil {
			return fielderr.New(at+"match.principal", "bad glob: "+err.Error())
		}
		for j, api := range r.Match.APIs {
			if _, ok := framing.KeyForName(api); !ok {
				return fielderr.New(fmt.Sprintf("%smatch.apis.%d", at, j), fmt.Sprintf("unknown Kafka API %q", api))
			}
		}
		for j, api := range r.Match.ExceptAPIs {
			if _, ok := framing.KeyForName(api); !ok {
				return fielderr.New(fmt.Sprintf("%smatch.except_apis.%d", at, j), fmt.Sprintf("unknown Kafka API %q", api))
			}
		}
		for _, list := range []struct {
			name  string
			globs []string
		}{{"topics", r.Match.Topics}, {"except_topics", r.Match.ExceptTopics}, {"except_principals", r.Match.ExceptPrincipals}} {
			for j, t := range list.globs {
				if err := checkGlob(t); err != nil {
					return fielderr.New(fmt.Sprintf("%smatch.%s.%d", at, list.name, j), "bad glob: "+err.Error())
				}
			}
		}
		if len(r.Match.APIs) > 0 && len(r.Match.ExceptAPIs) > 0 {
			return fielderr.New(at+"match", "apis and except_apis do not go together")
		}
		if r.Limits.Key == "topic" && r.Limits.BytesPerSecond == 0 {
			return fielderr.New(at+"limits.key", "topic keys a produce bytes_per_second")
		}
		if r.Require != nil {
			if err := validateRequire(r, at); err != nil {
				return err
			}
		}
		seen[r.Name] = true
	}
	return nil
}

func (l Limits) any() bool   { return l.rates() || l.sizes() }
func (l Limits) rates() bool { return l.RequestsPerSecond > 0 || l.BytesPerSecond > 0 }
func (l Limits) sizes() bool {
	return l.MaxRequestBytes > 0 || l.MaxBatchBytes > 0 || l.MaxBatchRecords > 0
}
