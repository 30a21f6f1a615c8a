// This file holds how a rule's require: block judges a request: which
// items (topics, config resources, produce partitions) break which
// condition, or, for the group APIs, the whole request. require_topics.go,
// require_produce.go and require_groups.go hold each API family's
// conditions; require_answer.go how a refusal is put into the request and
// its response.

package policy

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// Refusal is one item of a request a content rule refused: a topic
// (CreateTopics, CreatePartitions), a config resource (AlterConfigs,
// IncrementalAlterConfigs) or a produce partition. Names are copies:
// they outlive the frame.
type Refusal struct {
	Topic        string // the topic, or the config resource's name
	TopicID      [16]byte
	Partition    int32 // produce only
	ResourceType int8  // config APIs only
	Code         int16
	Condition    string // the counter's condition label
	Message      string // "rule topic-standards: replication_factor 1 below min 3"
	// RecordErrors name the records of a produced batch that broke a
	// record condition (Produce v8+ carries them).
	RecordErrors []RecordError
}

// RecordError is one record a record condition refused: its index in the
// partition's batch and why.
type RecordError struct {
	Index   int32
	Message string
}

// Violation is one broken condition a log rule saw: what kproxy would
// have refused.
type Violation struct {
	Rule, Condition, Message string
}

// maxRecordErrors bounds the record errors kept per partition: the
// partition's message says how many records broke the rule.
const maxRecordErrors = 64

// judgement is what a rule's conditions found in one request: a fault of
// the whole request (code set) or of some items, and how many items the
// request has, so the relay knows whether anything is left to forward.
type judgement struct {
	code      int16
	condition string
	message   string
	items     []Refusal
	total     int
}

func (j *judgement) broken() bool { return j.code != 0 || len(j.items) > 0 }

// whole reports whether nothing of the request is left to forward.
func (j *judgement) whole() bool { return j.code != 0 || len(j.items) >= j.total }

// refuse adds an item. Each item of a request is judged once, the first
// broken condition naming its refusal.
func (j *judgement) refuse(it Refusal) { j.items = append(j.items, it) }

// coverDuplicates refuses every other entry of a name that was refused:
// the request is re-framed without the name, so each of its entries must
// come back in the answer (a broker refuses duplicates anyway). n entries
// are named by name(i) and typ(i).
func (j *judgement) coverDuplicates(n int, name func(int) string, typ int8) {
	if len(j.items) == 0 {
		return
	}
	first := make(map[resourceKey]int, len(j.items)) // the refusal of each name
	for i := range j.items {
		first[resourceKey{j.items[i].Topic, j.items[i].ResourceType}] = i
	}
	seen := make(map[resourceKey]int, len(j.items))
	for i := 0; i < n; i++ {
		k := resourceKey{name(i), typ}
		if _, refused := first[k]; refused {
			seen[k]++
		}
	}
	for k, c := range seen {
		for ; c > 1; c-- { // one refusal is there; the other entries get copies
			j.items = append(j.items, j.items[first[k]])
		}
	}
}

// message prefixes a condition's message with the rule's name.
func (ru *rule) message(text string) string { return "rule " + ru.Name + ": " + text }

// require judges a request against the rule's conditions.
func (ru *rule) require(r *Request, body *framing.Body) judgement {
	if r.Key == framing.KeyProduce && r.AcksRead && ru.acksOnly() && acksMeet(ru.Require.requiredAcks(), r.Acks) {
		return judgement{} // header-level: the body is never decoded for it
	}
	req, err := body.Request()
	if err != nil || req == nil {
		return judgement{} // not readable: the relay forwards or refuses it on its own
	}
	var j judgement // past the header-level paths: it moves to the heap
	switch q := req.(type) {
	case *kmsg.CreateTopicsRequest:
		ru.requireCreateTopics(q, &j)
	case *kmsg.CreatePartitionsRequest:
		ru.requireCreatePartitions(q, &j)
	case *kmsg.AlterConfigsRequest:
		ru.requireAlterConfigs(q, &j)
	case *kmsg.IncrementalAlterConfigsRequest:
		ru.requireIncrementalAlterConfigs(q, &j)
	case *kmsg.ProduceRequest:
		ru.requireProduce(r, q, &j)
	case *kmsg.JoinGroupRequest:
		ru.requireJoinGroup(q, &j)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		ru.requireGroupID(q.Group, &j)
	case *kmsg.ShareGroupHeartbeatRequest:
		ru.requireGroupID(q.GroupID, &j)
	}
	return j
}

// acksOnly reports a rule whose only Produce condition is acks, on every
// topic: the frame's acks judge it whole.
func (ru *rule) acksOnly() bool {
	q := ru.Require
	return q.Acks != "" && !q.Idempotent && len(q.Compression) == 0 && !q.readsRecords() && !ru.byTopic()
}

// acksMeet reports whether a produce's acks meet the required ones (-1:
// all only; 1: 1 or all).
func acksMeet(want, acks int16) bool {
	switch want {
	case -1:
		return acks == -1
	case 1:
		return acks != 0
	}
	return true
}

// judged applies the rule's topic globs, when it has any, to an item's
// topic: a require rule with topics judges only those topics.
func (ru *rule) judged(topic string) bool { return !ru.byTopic() || ru.topicSelected(topic) }

// count adds a violation to the rule's per-condition counter.
func (ru *rule) count(condition string) {
	if ru.viol != nil {
		ru.viol.WithLabelValues(ru.Name, condition).Inc()
	}
}

// judge applies a content rule to a request it selected: nothing when the
// request meets every condition; for a log rule, the violations seen;
// for a reject rule, the refusal. Each condition broken is counted once
// per request.
func (ru *rule) judge(r *Request, body *framing.Body, obs *[]Violation, report *bool) (Verdict, bool) {
	j := ru.require(r, body)
	if !j.broken() {
		return Verdict{}, false
	}
	var seen [4]string
	conds := seen[:0]
	note := func(cond, msg string) {
		for _, c := range conds {
			if c == cond {
				return
			}
		}
		conds = append(conds, cond)
		ru.count(cond)
		if ru.Action == ActionLog && len(*obs) < maxObserved {
			*obs = append(*obs, Violation{Rule: ru.Name, Condition: cond, Message: msg})
		}
	}
	if j.code != 0 {
		note(j.condition, j.message)
	}
	for i := range j.items {
		note(j.items[i].Condition, j.items[i].Message)
	}
	if ru.Action == ActionLog {
		ru.m.logged.Inc()
		if ru.reports.Allow() {
			*report = true
		}
		return Verdict{}, false
	}
	ru.m.rejected.Inc()
	v := Verdict{Outcome: Reject, Rule: ru.Name, Code: j.code, Message: j.message, Reason: j.message,
		Refusals: j.items, Whole: j.whole(), total: j.total}
	if j.code == 0 {
		v.Code, v.Reason = j.items[0].Code, j.items[0].Message
	}
	return v, true
}

// maxObserved bounds the violations one request reports.
const maxObserved = 16
