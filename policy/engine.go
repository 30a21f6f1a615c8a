package policy

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// maxThrottle caps one throttle, as a broker caps it at its quota window
// (11 one-second samples by default): a huge request earns a long debt,
// paid over later requests, not one unbounded mute.
const maxThrottle = 11 * time.Second

// Kafka error codes a refusal uses.
const (
	codeTopicAuthorization   int16 = 29  // TOPIC_AUTHORIZATION_FAILED
	codeGroupAuthorization   int16 = 30  // GROUP_AUTHORIZATION_FAILED
	codeClusterAuthorization int16 = 31  // CLUSTER_AUTHORIZATION_FAILED
	codePolicyViolation      int16 = 44  // POLICY_VIOLATION
	codeThrottlingQuota      int16 = 89  // THROTTLING_QUOTA_EXCEEDED
	codeUnknownTopicID       int16 = 100 // UNKNOWN_TOPIC_ID
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

// Engine is a compiled, immutable set of rules plus their buckets. A
// reload builds a new Engine; live connections pick it up on their next
// request.
type Engine struct {
	rules []*rule
	// minFrame is the smallest max_request_bytes of a header-only rule:
	// frames above it are checked from their header, before the body is
	// read (see CheckOversize). 0 when there is none.
	minFrame int
	// throttles is set when some rule can give a Throttle verdict.
	throttles bool
	// refusesUnknownAPIs is set when a reject rule can select an API
	// kproxy does not know (see HidesUnknownAPIs).
	refusesUnknownAPIs bool
}

// HidesUnknownAPIs reports whether the ApiVersions answers relayed under
// this rule set must drop the APIs kproxy does not know. A reject rule
// that selects every API, or every API but some, selects those too (under
// a topic rule they may name any topic), and kproxy, which cannot write
// an answer in a layout it does not know, could only refuse one by
// closing the connection; a client told the broker lacks the API never
// sends it. Without such a rule they stay on offer and are relayed
// untouched.
func (e *Engine) HidesUnknownAPIs() bool { return e != nil && e.refusesUnknownAPIs }

type rule struct {
	Rule
	engine *Engine
	apis   [framing.MaxKey + 1]bool
	anyAPI bool
	// exceptAPIs: the rule lists the APIs it does not select, so it
	// selects those kproxy does not know too.
	exceptAPIs bool
	clientID   glob
	principal  glob
	exceptPrin []glob
	topics     []glob
	except     []glob
	m          ruleMetrics

	mu     sync.Mutex
	shared *meter       // key: rule
	byKey  *keyedMeters // key: client_id or topic
}

type ruleMetrics struct {
	matched, throttled, rejected, logged prometheus.Counter
	delay, closed                        prometheus.Counter
}

// Metrics are the per-rule counters, registered once and shared by every
// Engine a reload builds.
type Metrics struct {
	matched, throttled, rejected, logged, delay, closed *prometheus.CounterVec
}

// NewMetrics registers the policy counters with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	v := func(name, help string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"rule"})
		reg.MustRegister(c)
		return c
	}
	return &Metrics{
		matched:   v("kproxy_policy_matched_total", "Requests a rule's selector matched."),
		throttled: v("kproxy_policy_throttled_total", "Requests throttled by a rule."),
		rejected:  v("kproxy_policy_rejected_total", "Requests refused by a rule."),
		logged:    v("kproxy_policy_logged_total", "Requests a log-only rule would have acted on."),
		delay:     v("kproxy_policy_throttle_seconds_total", "Throttle time handed out by a rule."),
		closed:    v("kproxy_policy_closed_total", "Connections closed because a rule refused a request that cannot be answered (acks=0 produce, or a produce over max_request_bytes naming more partitions than kproxy keeps to answer)."),
	}
}

// New compiles a validated Config.
func New(c Config, m *Metrics) *Engine {
	e := &Engine{}
	for _, r := range c.Rules {
		cr := &rule{Rule: r, engine: e, anyAPI: len(r.Match.APIs) == 0,
			byKey: newKeyedMeters(maxKeyedMeters)}
		for _, name := range r.Match.APIs {
			k, _ := framing.KeyForName(name)
			cr.apis[k] = true
		}
		cr.clientID = compileGlob(r.Match.ClientID)
		cr.principal = compileGlob(r.Match.Principal)
		for _, p := range r.Match.ExceptPrincipals {
			cr.exceptPrin = append(cr.exceptPrin, compileGlob(p))
		}
		for _, t := range r.Match.Topics {
			cr.topics = append(cr.topics, compileGlob(t))
		}
		for _, t := range r.Match.ExceptTopics {
			cr.except = append(cr.except, compileGlob(t))
		}
		if len(r.Match.ExceptAPIs) > 0 {
			cr.anyAPI, cr.exceptAPIs = false, true
			for k := range cr.apis {
				cr.apis[k] = true
			}
			for _, name := range r.Match.ExceptAPIs {
				k, _ := framing.KeyForName(name)
				cr.apis[k] = false
			}
		}
		cr.m = ruleMetrics{m.matched.WithLabelValues(r.Name), m.throttled.WithLabelValues(r.Name),
			m.rejected.WithLabelValues(r.Name), m.logged.WithLabelValues(r.Name), m.delay.WithLabelValues(r.Name),
			m.closed.WithLabelValues(r.Name)}
		e.rules = append(e.rules, cr)
		if r.Action == ActionThrottle || r.Action == ActionReject && r.Limits.rates() {
			e.throttles = true // a rate rule rejects Fetch by throttling it
		}
		if l := r.Limits.MaxRequestBytes; l > 0 && !cr.byTopic() && (e.minFrame == 0 || l < e.minFrame) {
			e.minFrame = l
		}
		if r.Action == ActionReject && (cr.anyAPI || cr.exceptAPIs) {
			e.refusesUnknownAPIs = true
		}
	}
	return e
}

// MayThrottle reports whether Check can return Throttle. A relay that
// cannot pause a client (kproxy's poller path) takes only rule sets that
// do not.
func (e *Engine) MayThrottle() bool { return e != nil && e.throttles }

// MaxFrame is the frame size above which CheckOversize must see the
// request before its body is read; 0 when no rule limits frame sizes.
func (e *Engine) MaxFrame() int {
	if e == nil {
		return 0
	}
	return e.minFrame
}

// CheckOversize decides, from the header alone, whether a request of
// r.Bytes is refused by a header-only max_request_bytes rule. The relay
// then drops the body as it arrives instead of buffering it.
//
// A request it does not refuse goes on to Check, which counts every rule
// it matches; so the size rules matched here are counted only when the
// request is refused and Check never sees it. Each counts a request once.
func (e *Engine) CheckOversize(r *Request) Verdict {
	var seen [8]*rule
	matched := seen[:0]
	for _, ru := range e.rules {
		l := ru.Limits.MaxRequestBytes
		if l == 0 || r.Bytes <= l || ru.byTopic() || r.Key == framing.KeyFetch || !ru.selects(r, nil) {
			continue
		}
		if ru.Action != ActionReject {
			matched = append(matched, ru)
			continue
		}
		for _, m := range matched {
			m.m.matched.Inc()
			if m.Action == ActionLog {
				m.m.logged.Inc()
			}
		}
		ru.m.matched.Inc()
		ru.m.rejected.Inc()
		return Verdict{Outcome: Reject, Code: refusalCode(ru, r, nil), Rule: ru.Name,
			Reason: "request over max_request_bytes of rule " + ru.Name}
	}
	return Verdict{}
}

// Empty reports whether there are no rules, so the relay can skip Check.
func (e *Engine) Empty() bool { return e == nil || len(e.rules) == 0 }

// Check decides what to do with a request. Rules are checked in order; the
// first that rejects decides; throttle delays from several rules give the
// longest; log rules only count and report.
//
// body is the request's lazily decoded body, decoded only if a rule needs
// topics or partitions. It is a parameter of its own, not a field of
// Request, so that it can stay on the caller's stack.
func (e *Engine) Check(r *Request, body *framing.Body, now time.Time) Verdict {
	var v Verdict
	for _, ru := range e.rules {
		if !ru.selects(r, body) {
			continue
		}
		ru.m.matched.Inc()
		act, delay, reason := ru.limit(r, body, now)
		if !act {
			continue
		}
		var parts []Partition
		if ru.Limits.MaxBatchBytes > 0 || ru.Limits.MaxBatchRecords > 0 {
			if parts = ru.oversize(body); len(parts) == 0 {
				continue
			}
		} else if (len(ru.topics) > 0 || len(ru.except) > 0) && !ru.Limits.any() && r.Key == framing.KeyProduce {
			// Like a broker's ACLs: refuse the denied topics only.
			parts = ru.deniedPartitions(r, body)
		}
		switch {
		case ru.Action == ActionLog:
			ru.m.logged.Inc()
		case ru.Action == ActionReject && ru.Limits.rates() && r.Key == framing.KeyFetch:
			// A Java consumer fails on POLICY_VIOLATION: over a rate,
			// Fetch is throttled instead.
			if delay > v.Delay {
				v = Verdict{Outcome: Throttle, Delay: delay, Rule: ru.Name, Reason: reason}
			}
		case ru.Action == ActionReject && !(ru.Limits.rates() && Exempt(r.Key)):
			ru.m.rejected.Inc()
			code := refusalCode(ru, r, body)
			switch {
			case !framing.Known(r.Key, r.Version):
				reason = "an API version kproxy cannot read (" + framing.Name(r.Key) + " key " +
					strconv.Itoa(int(r.Key)) + " v" + strconv.Itoa(int(r.Version)) + "), under rule " + ru.Name
			case code == codeUnknownTopicID:
				reason = "a topic kproxy cannot name (an id it has not learnt), under rule " + ru.Name
			case code == codeClusterAuthorization && ru.byTopic():
				reason = "a request that may cover any topic (an ACL on \"*\", a prefix or a filter, every partition, an API only brokers send), under rule " + ru.Name
			}
			return Verdict{Outcome: Reject, Code: code, Rule: ru.Name, Reason: reason, Partitions: parts}
		case ru.Action == ActionThrottle && delay > v.Delay && !Exempt(r.Key):
			v = Verdict{Outcome: Throttle, Delay: delay, Rule: ru.Name, Reason: reason}
		}
	}
	if v.Outcome == Throttle {
		v.Delay = min(v.Delay, maxThrottle)
		e.rule(v.Rule).m.throttled.Inc()
		e.rule(v.Rule).m.delay.Add(v.Delay.Seconds())
	}
	return v
}

// Closed counts a connection the relay closed because the named rule
// refused a request it could not answer.
func (e *Engine) Closed(rule string) {
	if r := e.rule(rule); r != nil {
		r.m.closed.Inc()
	}
}

func (e *Engine) rule(name string) *rule {
	for _, r := range e.rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Exempt APIs are never delayed or refused by a rate: a late heartbeat
// costs the consumer its group membership.
func Exempt(key int16) bool { return key == 12 || key == 68 } // Heartbeat, ConsumerGroupHeartbeat

// selects reports whether a rule's selector matches the request.
func (ru *rule) selects(r *Request, body *framing.Body) bool {
	switch {
	case ru.anyAPI:
	case r.Key < 0 || int(r.Key) >= len(ru.apis):
		if !ru.exceptAPIs { // a key kproxy does not know is in no list
			return false
		}
	case !ru.apis[r.Key]:
		return false
	}
	if ru.Match.ClientID != "" && !ru.clientID.match(r.ClientID) {
		return false
	}
	if ru.Match.Listener != "" && ru.Match.Listener != r.Listener {
		return false
	}
	if ru.Match.Principal != "" && !ru.matchPrincipal(r.Conn) {
		return false
	}
	if len(ru.exceptPrin) > 0 && ru.exceptsPrincipal(r.Conn) {
		return false
	}
	if len(ru.topics) > 0 || len(ru.except) > 0 {
		return ru.matchTopics(r, body) != noTopic
	}
	return true
}

// matchPrincipal reports whether any identity of the connection matches
// the rule's principal glob; a connection without one matches none.
func (ru *rule) matchPrincipal(c *ConnState) bool {
	if c == nil {
		return false
	}
	for _, p := range c.Principals {
		if ru.principal.match(p) {
			return true
		}
	}
	return false
}

// exceptsPrincipal reports whether an identity of the connection is in
// the rule's except_principals; a connection without one is in no list.
func (ru *rule) exceptsPrincipal(c *ConnState) bool {
	if c == nil {
		return false
	}
	for _, p := range c.Principals {
		for _, g := range ru.exceptPrin {
			if g.match(p) {
				return true
			}
		}
	}
	return false
}

// byTopic reports whether the rule selects by topic (and so needs bodies).
func (ru *rule) byTopic() bool { return len(ru.topics) > 0 || len(ru.except) > 0 }

// topicSelected applies the rule's topic globs and exceptions to a name.
// A topic kproxy cannot name may be any topic: every topic rule selects
// it, so that a rule fails closed, never open.
func (ru *rule) topicSelected(topic string) bool {
	if topic == framing.UnknownTopic {
		return true
	}
	for _, g := range ru.except {
		if g.match(topic) {
			return false
		}
	}
	if len(ru.topics) == 0 {
		return len(ru.except) > 0
	}
	for _, g := range ru.topics {
		if g.match(topic) {
			return true
		}
	}
	return false
}

// topicMatch is how a request's topics meet a rule's topic selector.
type topicMatch uint8

const (
	noTopic      topicMatch = iota // no topic selected
	unknownTopic                   // only topics kproxy cannot name
	namedTopic                     // a topic selected by its name
)

// matchTopics reports whether the request names a topic the rule selects.
// A body kproxy cannot read (a version kmsg does not know, or a malformed
// one) of an API that can name topics, or of an API kproxy does not know,
// counts as naming an unknown topic.
func (ru *rule) matchTopics(r *Request, body *framing.Body) topicMatch {
	req, err := body.Request()
	if err != nil || req == nil {
		if framing.NamesTopics(r.Key) {
			return unknownTopic
		}
		return noTopic
	}
	m := noTopic
	framing.EachTopic(req, r.Topics, func(topic string, _ int32) bool {
		switch {
		case topic == framing.UnknownTopic:
			m = unknownTopic
		case ru.topicSelected(topic):
			m = namedTopic
		}
		return m != namedTopic
	})
	return m
}

// limit says whether the rule acts on the request (always, for a rule with
// no limits) and for how long a throttle would hold the client.
func (ru *rule) limit(r *Request, body *framing.Body, now time.Time) (act bool, delay time.Duration, reason string) {
	if !ru.Limits.any() {
		return true, 0, "denied by rule " + ru.Name
	}
	if Exempt(r.Key) {
		return false, 0, "" // heartbeats neither wait nor use up a rate
	}
	if l := ru.Limits; l.sizes() {
		switch {
		case l.MaxRequestBytes > 0 && r.Bytes > l.MaxRequestBytes && r.Key != framing.KeyFetch:
			return true, 0, "request over max_request_bytes of rule " + ru.Name
		case (l.MaxBatchBytes > 0 || l.MaxBatchRecords > 0) && r.Key == framing.KeyProduce:
			return true, 0, "batch over the size limits of rule " + ru.Name // Check narrows to the partitions
		}
		return false, 0, ""
	}
	if ru.Limits.Key == "topic" {
		return ru.limitTopics(r, body, now)
	}
	m := ru.meter(r, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.b
	n := [2]float64{1, float64(r.Bytes)}
	var d time.Duration
	if ru.Action == ActionReject && r.Key != framing.KeyFetch {
		// Peek at both buckets before taking from either: a refused
		// request costs nothing, in the request bucket too. Fetch is
		// throttled instead of refused (see Check), so it is relayed and
		// must pay like any throttled request.
		for i, bk := range b {
			if bk != nil {
				d = max(d, bk.peek(n[i], now))
			}
		}
		if d > 0 {
			return true, d, "over the rate of rule " + ru.Name
		}
		for i, bk := range b { // room: it goes, charging its tokens
			if bk != nil {
				bk.take(n[i], now)
			}
		}
		return false, 0, ""
	}
	for i, bk := range b {
		if bk != nil {
			d = max(d, bk.take(n[i], now))
		}
	}
	if d == 0 {
		return false, 0, ""
	}
	return true, d, "over the rate of rule " + ru.Name
}

// oversize returns the partitions of a produce over the rule's batch
// limits.
func (ru *rule) oversize(body *framing.Body) []Partition {
	req, err := body.Request()
	if err != nil || req == nil {
		return nil
	}
	p, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return nil
	}
	return oversizePartitions(p, ru.Limits)
}

// deniedPartitions returns the partitions of a produce whose topic the
// rule's topic globs match.
func (ru *rule) deniedPartitions(r *Request, body *framing.Body) []Partition {
	req, _ := body.Request()
	p, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return nil
	}
	return partitionsOf(p, r.Topics, ru.topicSelected)
}

// limitTopics charges each topic of a produce with the bytes produced to
// it, on that topic's own bucket, and throttles by the most indebted.
func (ru *rule) limitTopics(r *Request, body *framing.Body, now time.Time) (bool, time.Duration, string) {
	req, _ := body.Request()
	p, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return false, 0, ""
	}
	type charge struct {
		m *meter
		n float64
	}
	charges := make([]charge, 0, len(p.Topics))
	for _, t := range p.Topics {
		name := t.Topic
		if name == "" {
			name = r.Topics.Name(t.TopicID)
		}
		n := 0
		for _, part := range t.Partitions {
			n += len(part.Records)
		}
		charges = append(charges, charge{ru.topicMeter(name, now), float64(n)})
	}
	const reason = "a topic over the produce rate of rule "
	var d time.Duration
	if ru.Action == ActionReject { // a refused produce costs nothing
		for _, c := range charges {
			c.m.mu.Lock()
			d = max(d, c.m.b[1].peek(c.n, now))
			c.m.mu.Unlock()
		}
		if d > 0 {
			return true, d, reason + ru.Name
		}
	}
	for _, c := range charges {
		c.m.mu.Lock()
		d = max(d, c.m.b[1].take(c.n, now))
		c.m.mu.Unlock()
	}
	if d == 0 {
		return false, 0, ""
	}
	return true, d, reason + ru.Name
}

func (ru *rule) topicMeter(topic string, now time.Time) *meter {
	ru.mu.Lock()
	defer ru.mu.Unlock()
	m, fresh := ru.byKey.get(topic, now)
	if fresh {
		m.b[1] = newBucket(ru.Limits.BytesPerSecond, now)
	}
	return m
}

// meter returns the buckets this request counts against.
func (ru *rule) meter(r *Request, now time.Time) *meter {
	mk := func(m *meter) *meter {
		if ru.Limits.RequestsPerSecond > 0 {
			m.b[0] = newBucket(ru.Limits.RequestsPerSecond, now)
		}
		if ru.Limits.BytesPerSecond > 0 {
			m.b[1] = newBucket(ru.Limits.BytesPerSecond, now)
		}
		return m
	}
	switch ru.Limits.Key {
	case "connection":
		c := r.Conn
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.buckets == nil || c.engine != ru.engine {
			// New connection, or rules reloaded: start afresh, and let
			// the old engine's rules go.
			c.buckets, c.engine = map[*rule]*meter{}, ru.engine
		}
		m, ok := c.buckets[ru]
		if !ok {
			m = mk(&meter{})
			c.buckets[ru] = m
		}
		return m
	case "rule":
		ru.mu.Lock()
		defer ru.mu.Unlock()
		if ru.shared == nil {
			ru.shared = mk(&meter{})
		}
		return ru.shared
	default:
		ru.mu.Lock()
		defer ru.mu.Unlock()
		m, fresh := ru.byKey.get(r.ClientID, now)
		if fresh {
			mk(m)
		}
		return m
	}
}

// refusalCode is the Kafka error a refused request gets, as a broker
// would choose it: for access rules, TOPIC_AUTHORIZATION_FAILED when the
// rule is about topics (UNKNOWN_TOPIC_ID when only topics named by ids
// kproxy has not learnt made it match: the client then refreshes its
// metadata through kproxy, which learns the ids, and retries under the
// rule; CLUSTER_AUTHORIZATION_FAILED when only an ACL filter or pattern, a
// null ElectLeaders list or a broker-only API did, as no id learnt would
// name them), GROUP_AUTHORIZATION_FAILED for group APIs,
// TOPIC_AUTHORIZATION_FAILED for other requests naming topics, and
// CLUSTER_AUTHORIZATION_FAILED otherwise (ACL, ElectLeaders and
// broker-only APIs too, which a broker authorizes against the cluster);
// over a rate, the quota
// error for the topic-creation APIs in the versions that know it
// (KIP-599), else POLICY_VIOLATION; over a size, MESSAGE_TOO_LARGE for
// Produce.
func refusalCode(ru *rule, r *Request, body *framing.Body) int16 {
	switch {
	case ru.Limits.sizes() && r.Key == framing.KeyProduce:
		return codeMessageTooLarge
	case ru.Limits.any():
		if (r.Key == 19 && r.Version >= 6) || (r.Key == 20 && r.Version >= 5) || (r.Key == 37 && r.Version >= 3) {
			return codeThrottlingQuota // CreateTopics, DeleteTopics, CreatePartitions
		}
		return codePolicyViolation
	case ru.byTopic():
		switch {
		case ru.matchTopics(r, body) != unknownTopic:
			return codeTopicAuthorization
		case clusterAPI(r.Key):
			return codeClusterAuthorization // no id learnt would name it
		}
		return codeUnknownTopicID
	case framing.GroupAPI(r.Key):
		return codeGroupAuthorization
	case clusterAPI(r.Key):
		return codeClusterAuthorization
	}
	if req, _ := body.Request(); req != nil && hasTopics(req, r.Topics) {
		return codeTopicAuthorization
	}
	return codeClusterAuthorization
}

// clusterAPI reports the APIs a broker authorizes against the cluster
// although they can be about topics: the ACL APIs, ElectLeaders and those
// only brokers send each other.
func clusterAPI(key int16) bool {
	return framing.BrokerOnly(key) || key >= 29 && key <= 31 || key == 43 // Describe/Create/DeleteAcls, ElectLeaders
}

func hasTopics(req kmsg.Request, ids *framing.TopicIDs) bool {
	named := false
	framing.EachTopic(req, ids, func(string, int32) bool { named = true; return false })
	return named
}
