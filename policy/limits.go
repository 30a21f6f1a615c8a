// This file holds how a rule's limits decide whether it acts on a request
// it selected: request and batch sizes, and the request and byte rates
// charged against token buckets kept per connection, per rule, per
// client id or per topic. Heartbeats are exempt from rates.

package policy

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// Exempt APIs are never delayed or refused by a rate: a late heartbeat
// costs the consumer (classic, KIP-848, share or streams group) its group
// membership. They are not unbounded: see exemptCeiling.
func Exempt(key int16) bool {
	switch key {
	case framing.KeyHeartbeat, framing.KeyConsumerGroupHeartbeat,
		framing.KeyShareGroupHeartbeat, framing.KeyStreamsGroupHeartbeat:
		return true
	}
	return false
}

// exemptCeiling is how many times a rule's request rate the exempt APIs
// may reach before the connection is closed: a group member heartbeats
// every few seconds, and a few times faster while it joins; a client
// that floods heartbeats is not one, and must not get past the rule by
// sending its load as them. exemptBurst is the least burst allowed, so a
// rule of a fraction of a request per second does not close a member
// joining its group.
const (
	exemptCeiling = 10
	exemptBurst   = 10
)

// exemptOver charges one exempt request to the rule's ceiling for them
// and reports whether it is over (the connection is then closed). The
// ceiling is per connection, whatever the rule's key: many members
// sharing a client id (sarama, rdkafka, a Java group's default) each
// heartbeat at their own pace. Only rules with a request rate have one.
func (ru *rule) exemptOver(r *Request, now time.Time) bool {
	if ru.Limits.RequestsPerSecond <= 0 || r.Conn == nil {
		return false
	}
	m := ru.connMeter(r.Conn, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.exempt == nil {
		rate := exemptCeiling * ru.Limits.RequestsPerSecond
		m.exempt = &bucket{rate: rate, burst: max(rate, exemptBurst), tokens: max(rate, exemptBurst), last: now.UnixNano()}
	}
	if m.exempt.peek(1, now) > 0 {
		return true
	}
	m.exempt.take(1, now)
	return false
}

// limit says whether the rule acts on the request (always, for a rule with
// no limits) and for how long a throttle would hold the client.
func (ru *rule) limit(r *Request, body *framing.Body, now time.Time) (act bool, delay time.Duration, reason string) {
	if !ru.Limits.any() {
		return true, 0, "denied by rule " + ru.Name
	}
	if Exempt(r.Key) {
		// Heartbeats neither wait nor use up a rate, up to the ceiling.
		if ru.exemptOver(r, now) {
			return true, 0, framing.Name(r.Key) + " over " + strconv.Itoa(exemptCeiling) + " times the request rate of rule " + ru.Name
		}
		return false, 0, ""
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
	switch ru.Limits.Key {
	case "connection":
		return ru.connMeter(r.Conn, now)
	case "rule":
		ru.mu.Lock()
		defer ru.mu.Unlock()
		if ru.shared == nil {
			ru.shared = ru.newMeter(&meter{}, now)
		}
		return ru.shared
	default:
		ru.mu.Lock()
		defer ru.mu.Unlock()
		m, fresh := ru.byKey.get(r.ClientID, now)
		if fresh {
			ru.newMeter(m, now)
		}
		return m
	}
}

// connMeter is the rule's meter on connection c: its buckets when the
// rule is keyed by connection, and the ceiling of exempt APIs whatever
// the key. A reload starts every connection's meters afresh.
func (ru *rule) connMeter(c *ConnState, now time.Time) *meter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buckets == nil || c.engine != ru.engine {
		// New connection, or rules reloaded: let the old engine's
		// rules go.
		c.buckets, c.engine = map[*rule]*meter{}, ru.engine
	}
	m, ok := c.buckets[ru]
	if !ok {
		m = ru.newMeter(&meter{}, now)
		c.buckets[ru] = m
	}
	return m
}

// newMeter gives m the rule's rate buckets, full.
func (ru *rule) newMeter(m *meter, now time.Time) *meter {
	if ru.Limits.RequestsPerSecond > 0 {
		m.b[0] = newBucket(ru.Limits.RequestsPerSecond, now)
	}
	if ru.Limits.BytesPerSecond > 0 {
		m.b[1] = newBucket(ru.Limits.BytesPerSecond, now)
	}
	return m
}
