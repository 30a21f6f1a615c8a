// This file holds the per-request decision: Check, and CheckOversize for
// a frame refused from its header alone. They walk the rules in order and
// combine what select.go (does the rule apply), limits.go (does it act)
// and refusal_codes.go (with which error) say into one Verdict.

package policy

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// maxThrottle caps one throttle, as a broker caps it at its quota window
// (11 one-second samples by default): a huge request earns a long debt,
// paid over later requests, not one unbounded mute.
const maxThrottle = 11 * time.Second

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

// Check decides what to do with a request. Rules are checked in order; the
// first that rejects the whole request decides; a rule that refuses only
// some items (topics, resources, partitions) leaves the rest to the rules
// after it, so one bad item never carries the others past them; throttle
// delays from several rules give the longest; log rules only count and
// report.
//
// body is the request's lazily decoded body, decoded only if a rule needs
// topics or partitions. It is a parameter of its own, not a field of
// Request, so that it can stay on the caller's stack.
func (e *Engine) Check(r *Request, body *framing.Body, now time.Time) Verdict {
	var v Verdict
	var observed []Violation
	var report bool
	var part *Verdict // the items refused so far, when only some are
	for _, ru := range e.rules {
		if !ru.selects(r, body) {
			continue
		}
		ru.m.matched.Inc()
		if ru.Require != nil {
			if rv, refused := ru.judge(r, body, &observed, &report); refused {
				if part = part.merge(rv); part.Whole {
					part.Observed, part.Report = observed, report
					return *part
				}
			}
			continue
		}
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
		case Exempt(r.Key) && ru.Limits.rates():
			// Only the ceiling acts on exempt APIs: the connection is
			// closed, whatever the action.
			return Verdict{Outcome: Close, Rule: ru.Name, Reason: reason, Observed: observed, Report: report}
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
			if total := producePartitions(body); len(parts) > 0 && len(parts) < total {
				// Some partitions refused: the later rules judge the rest.
				pv := Verdict{Outcome: Reject, Code: code, Rule: ru.Name, Reason: reason, Partitions: parts, total: total}
				for _, p := range parts {
					pv.Refusals = append(pv.Refusals, Refusal{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, Code: code, Message: reason})
				}
				if part = part.merge(pv); !part.Whole {
					continue
				}
			}
			return Verdict{Outcome: Reject, Code: code, Rule: ru.Name, Reason: reason, Partitions: parts,
				Observed: observed, Report: report}
		case ru.Action == ActionThrottle && delay > v.Delay && !Exempt(r.Key):
			v = Verdict{Outcome: Throttle, Delay: delay, Rule: ru.Name, Reason: reason}
		}
	}
	if v.Outcome == Throttle {
		v.Delay = min(v.Delay, maxThrottle)
		e.rule(v.Rule).m.throttled.Inc()
		e.rule(v.Rule).m.delay.Add(v.Delay.Seconds())
	}
	if part != nil { // the rest goes on, throttled if a rule said so
		part.Delay = v.Delay
		v = *part
	}
	v.Observed, v.Report = observed, report
	return v
}

// merge adds a partial refusal's items to those refused so far (p, nil for
// none) and says whether nothing is left to forward. The first refusal
// names the verdict; an item refused twice keeps its first refusal.
func (p *Verdict) merge(q Verdict) *Verdict {
	if p == nil {
		q.Whole = q.Whole || len(q.Refusals) >= q.total
		return &q
	}
	seen := make(map[refusalKey]bool, len(p.Refusals))
	for i := range p.Refusals {
		seen[p.Refusals[i].key()] = true
	}
	for _, it := range q.Refusals {
		if !seen[it.key()] {
			seen[it.key()] = true
			p.Refusals = append(p.Refusals, it)
		}
	}
	p.Partitions = append(p.Partitions, q.Partitions...)
	p.total = max(p.total, q.total)
	p.Whole = q.Whole || len(p.Refusals) >= p.total
	return p
}

// refusalKey names the item a refusal is about.
type refusalKey struct {
	topic     string
	id        [16]byte
	partition int32
	typ       int8
}

func (r *Refusal) key() refusalKey {
	return refusalKey{r.Topic, r.TopicID, r.Partition, r.ResourceType}
}

// producePartitions counts a produce's partitions; 0 for another request.
func producePartitions(body *framing.Body) int {
	req, _ := body.Request()
	p, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return 0
	}
	n := 0
	for _, t := range p.Topics {
		n += len(t.Partitions)
	}
	return n
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
