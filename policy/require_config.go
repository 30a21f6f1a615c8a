// This file holds a rule's require: block, the conditions a matching
// request must meet (governance rules), and how Validate checks them.
// What each condition reads and how a violation is answered live in the
// require_*.go files beside it.

package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/fielderr"
)

// Require lists the conditions a request the rule selects must meet; a
// rule with one acts only on the requests that break one. A field left
// out is no condition.
type Require struct {
	// Partitions bounds CreateTopics' partition counts and
	// CreatePartitions' new count.
	Partitions *Range `yaml:"partitions"`
	// ReplicationFactor bounds CreateTopics' replication factors.
	ReplicationFactor *Range `yaml:"replication_factor"`
	// TopicName is a glob every topic CreateTopics creates must match.
	TopicName string `yaml:"topic_name"`
	// Configs bound topic configs as CreateTopics sets them, and as
	// AlterConfigs and IncrementalAlterConfigs change them on topics. A
	// config left out or deleted is not judged: the broker's default
	// applies.
	Configs map[string]ConfigRule `yaml:"configs"`
	// Acks is the acks a Produce must ask for: all (or -1) takes -1
	// only; 1 takes 1 or all.
	Acks string `yaml:"acks"`
	// Idempotent, when true, requires every produced batch to carry a
	// producer id.
	Idempotent bool `yaml:"idempotent"`
	// Compression lists the codecs produced batches may use: none, gzip,
	// snappy, lz4, zstd.
	Compression []string `yaml:"compression"`
	// RecordKey, when true, requires every produced record to have a
	// non-null key.
	RecordKey bool `yaml:"record_key"`
	// MaxRecordBytes bounds each produced record as encoded in its batch
	// (key, value and headers).
	MaxRecordBytes int `yaml:"max_record_bytes"`
	// Headers are header keys every produced record must carry.
	Headers []string `yaml:"headers"`
	// GroupID is a glob the group of JoinGroup and ConsumerGroupHeartbeat
	// (and ShareGroupHeartbeat) must match.
	GroupID string `yaml:"group_id"`
	// SessionTimeoutMs bounds JoinGroup's session timeout.
	SessionTimeoutMs *Range `yaml:"session_timeout_ms"`
}

// Range bounds a number; either end may be left out.
type Range struct {
	Min *int64 `yaml:"min"`
	Max *int64 `yaml:"max"`
}

// ConfigRule bounds one config's value: a number within min and max, or
// one of a list (for a list config such as cleanup.policy, every item).
type ConfigRule struct {
	Min   *int64   `yaml:"min"`
	Max   *int64   `yaml:"max"`
	OneOf []string `yaml:"one_of"`
}

// The condition names, as counters and messages name them.
const (
	condPartitions        = "partitions"
	condReplicationFactor = "replication_factor"
	condTopicName         = "topic_name"
	condConfigs           = "configs"
	condAcks              = "acks"
	condIdempotent        = "idempotent"
	condCompression       = "compression"
	condRecordKey         = "record_key"
	condMaxRecordBytes    = "max_record_bytes"
	condHeaders           = "headers"
	condGroupID           = "group_id"
	condSessionTimeout    = "session_timeout_ms"
)

// conditionAPIs are the APIs whose requests carry what each condition
// judges.
var conditionAPIs = map[string][]int16{
	condPartitions:        {framing.KeyCreateTopics, framing.KeyCreatePartitions},
	condReplicationFactor: {framing.KeyCreateTopics},
	condTopicName:         {framing.KeyCreateTopics},
	condConfigs:           {framing.KeyCreateTopics, framing.KeyAlterConfigs, framing.KeyIncrementalAlterConfigs},
	condAcks:              {framing.KeyProduce},
	condIdempotent:        {framing.KeyProduce},
	condCompression:       {framing.KeyProduce},
	condRecordKey:         {framing.KeyProduce},
	condMaxRecordBytes:    {framing.KeyProduce},
	condHeaders:           {framing.KeyProduce},
	condGroupID:           {framing.KeyJoinGroup, framing.KeyConsumerGroupHeartbeat, framing.KeyShareGroupHeartbeat},
	condSessionTimeout:    {framing.KeyJoinGroup},
}

// codecNames are the values of compression, by codec number.
var codecNames = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// conditions lists the conditions set, in a fixed order.
func (q *Require) conditions() []string {
	if q == nil {
		return nil
	}
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(q.Partitions != nil, condPartitions)
	add(q.ReplicationFactor != nil, condReplicationFactor)
	add(q.TopicName != "", condTopicName)
	add(len(q.Configs) > 0, condConfigs)
	add(q.Acks != "", condAcks)
	add(q.Idempotent, condIdempotent)
	add(len(q.Compression) > 0, condCompression)
	add(q.RecordKey, condRecordKey)
	add(q.MaxRecordBytes != 0, condMaxRecordBytes)
	add(len(q.Headers) > 0, condHeaders)
	add(q.GroupID != "", condGroupID)
	add(q.SessionTimeoutMs != nil, condSessionTimeout)
	return out
}

// readsRecords reports whether a condition needs produced records
// decoded (not only batch headers).
func (q *Require) readsRecords() bool {
	return q != nil && (q.RecordKey || q.MaxRecordBytes > 0 || len(q.Headers) > 0)
}

// validateRequire checks a rule's require block; at is the rule's path.
func validateRequire(r Rule, at string) error {
	q := r.Require
	conds := q.conditions()
	if len(conds) == 0 {
		return fielderr.New(at+"require", "names no condition")
	}
	if r.Limits.any() {
		return fielderr.New(at+"require", "put require and limits in separate rules")
	}
	if r.Action == ActionThrottle {
		return fielderr.New(at+"action", "a require rule rejects or logs (throttle is for rates)")
	}
	at += "require."
	for _, c := range []struct {
		name string
		r    *Range
	}{{condPartitions, q.Partitions}, {condReplicationFactor, q.ReplicationFactor}, {condSessionTimeout, q.SessionTimeoutMs}} {
		if err := c.r.check(at + c.name); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(q.Configs))
	for name := range q.Configs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := q.Configs[name]
		p := at + "configs." + name
		switch {
		case name == "":
			return fielderr.New(at+"configs", "a config name is empty")
		case c.Min == nil && c.Max == nil && len(c.OneOf) == 0:
			return fielderr.New(p, "needs min, max or one_of")
		case len(c.OneOf) > 0 && (c.Min != nil || c.Max != nil):
			return fielderr.New(p, "one_of and min/max do not go together")
		}
		if err := (&Range{c.Min, c.Max}).check(p); err != nil {
			return err
		}
	}
	switch strings.ToLower(q.Acks) {
	case "", "all", "-1", "1":
	default:
		return fielderr.New(at+"acks", fmt.Sprintf("%q: must be all (or -1) or 1 (acks=0 cannot be answered, so it is never a requirement)", q.Acks))
	}
	for j, c := range q.Compression {
		if codecNumber(c) < 0 {
			return fielderr.New(fmt.Sprintf("%scompression.%d", at, j), fmt.Sprintf("unknown codec %q: none, gzip, snappy, lz4 or zstd", c))
		}
	}
	if q.MaxRecordBytes < 0 {
		return fielderr.New(at+"max_record_bytes", "must not be negative")
	}
	for j, h := range q.Headers {
		if h == "" {
			return fielderr.New(fmt.Sprintf("%sheaders.%d", at, j), "is empty")
		}
	}
	for _, g := range []struct{ name, glob string }{{condTopicName, q.TopicName}, {condGroupID, q.GroupID}} {
		if err := checkGlob(g.glob); err != nil {
			return fielderr.New(at+g.name, "bad glob: "+err.Error())
		}
	}
	for _, c := range conds {
		if (c == condGroupID || c == condSessionTimeout) && len(r.Match.Topics) > 0 {
			return fielderr.New(at+c, "the group APIs name no topic, so a rule with match.topics never selects them: it could never be met")
		}
		if !selectsAny(r.Match, conditionAPIs[c]) {
			return fielderr.New(at+c, "applies to "+apiNames(conditionAPIs[c])+", and the rule selects none of them: it could never be met")
		}
	}
	return nil
}

// check reports a range whose min is above its max.
func (g *Range) check(at string) error {
	if g != nil && g.Min != nil && g.Max != nil && *g.Min > *g.Max {
		return fielderr.New(at, fmt.Sprintf("min %d is above max %d", *g.Min, *g.Max))
	}
	return nil
}

// selectsAny reports whether a selector can select one of keys.
func selectsAny(m Selector, keys []int16) bool {
	for _, k := range keys {
		name := framing.Name(k)
		switch {
		case len(m.APIs) > 0:
			if contains(m.APIs, name) {
				return true
			}
		case !contains(m.ExceptAPIs, name):
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func apiNames(keys []int16) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = framing.Name(k)
	}
	return strings.Join(names, ", ")
}

// codecNumber is a codec name's number in a batch's attributes, -1 for
// none known.
func codecNumber(name string) int {
	for i, n := range codecNames {
		if strings.EqualFold(n, name) {
			return i
		}
	}
	return -1
}

// requiredAcks is the acks condition as a number: -1 for all, 1 for 1,
// 0 for no condition.
func (q *Require) requiredAcks() int16 {
	if q == nil {
		return 0
	}
	switch strings.ToLower(q.Acks) {
	case "all", "-1":
		return -1
	case "1":
		return 1
	}
	return 0
}

// describe writes a bound for messages: "min 3".
func bound(which string, n int64) string { return which + " " + strconv.FormatInt(n, 10) }
