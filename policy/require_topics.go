// This file holds the conditions on what clients create and change:
// partitions, replication_factor, topic_name and configs, judged per
// topic (CreateTopics, CreatePartitions) or per topic resource
// (AlterConfigs, IncrementalAlterConfigs), each refused with
// POLICY_VIOLATION as a broker's create-topic or alter-config policy
// would refuse it.

package policy

import (
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicResource is ConfigResourceType TOPIC.
const topicResource = int8(kmsg.ConfigResourceTypeTopic)

func (ru *rule) requireCreateTopics(q *kmsg.CreateTopicsRequest, j *judgement) {
	c := ru.Require
	j.total = len(q.Topics)
	for i := range q.Topics {
		t := &q.Topics[i]
		if !ru.judged(t.Topic) {
			continue
		}
		parts, rf := int64(t.NumPartitions), int64(t.ReplicationFactor)
		if len(t.ReplicaAssignment) > 0 { // counts given by the assignment
			parts, rf = int64(len(t.ReplicaAssignment)), int64(len(t.ReplicaAssignment[0].Replicas))
		}
		cond, text := "", ""
		switch {
		case c.TopicName != "" && !ru.topicName.match(t.Topic):
			cond, text = condTopicName, "topic_name "+strconv.Quote(t.Topic)+" does not match "+strconv.Quote(c.TopicName)
		case c.Partitions != nil:
			cond, text = condPartitions, c.Partitions.judge(condPartitions, parts)
		}
		if text == "" && c.ReplicationFactor != nil {
			cond, text = condReplicationFactor, c.ReplicationFactor.judge(condReplicationFactor, rf)
		}
		if text == "" {
			for _, cf := range t.Configs {
				if cf.Value == nil {
					continue // the broker's default
				}
				if cond, text = ru.judgeConfig(cf.Name, *cf.Value); text != "" {
					break
				}
			}
		}
		if text != "" {
			j.refuse(Refusal{Topic: string([]byte(t.Topic)), Code: codePolicyViolation, Condition: cond, Message: ru.message(text)})
		}
	}
	j.coverDuplicates(len(q.Topics), func(i int) string { return q.Topics[i].Topic }, 0)
}

func (ru *rule) requireCreatePartitions(q *kmsg.CreatePartitionsRequest, j *judgement) {
	j.total = len(q.Topics)
	if ru.Require.Partitions == nil {
		return
	}
	for i := range q.Topics {
		t := &q.Topics[i]
		if !ru.judged(t.Topic) {
			continue
		}
		if text := ru.Require.Partitions.judge(condPartitions, int64(t.Count)); text != "" {
			j.refuse(Refusal{Topic: string([]byte(t.Topic)), Code: codePolicyViolation, Condition: condPartitions, Message: ru.message(text)})
		}
	}
	j.coverDuplicates(len(q.Topics), func(i int) string { return q.Topics[i].Topic }, 0)
}

func (ru *rule) requireAlterConfigs(q *kmsg.AlterConfigsRequest, j *judgement) {
	requireConfigResources(ru, j, q.Resources, func(r *kmsg.AlterConfigsRequestResource) (int8, string, func(func(name string, value *string))) {
		return int8(r.ResourceType), r.ResourceName, func(each func(string, *string)) {
			for _, cf := range r.Configs {
				each(cf.Name, cf.Value)
			}
		}
	})
}

func (ru *rule) requireIncrementalAlterConfigs(q *kmsg.IncrementalAlterConfigsRequest, j *judgement) {
	requireConfigResources(ru, j, q.Resources, func(r *kmsg.IncrementalAlterConfigsRequestResource) (int8, string, func(func(name string, value *string))) {
		return int8(r.ResourceType), r.ResourceName, func(each func(string, *string)) {
			for _, cf := range r.Configs {
				// SET and APPEND give values; DELETE and SUBTRACT only
				// take away (a deleted config is the broker's default).
				if cf.Op == kmsg.IncrementalAlterConfigOpSet || cf.Op == kmsg.IncrementalAlterConfigOpAppend {
					each(cf.Name, cf.Value)
				}
			}
		}
	})
}

// requireConfigResources judges the topic resources of AlterConfigs and
// IncrementalAlterConfigs: each refused at its first config value that
// breaks the rule. of says what a resource is and walks the values it
// sets (nil: reset to the default, not judged).
func requireConfigResources[T any](ru *rule, j *judgement, resources []T, of func(*T) (int8, string, func(func(string, *string)))) {
	j.total = len(resources)
	for i := range resources {
		typ, name, values := of(&resources[i])
		if typ != topicResource || !ru.judged(name) {
			continue
		}
		refused := false
		values(func(config string, value *string) {
			if refused || value == nil {
				return
			}
			if cond, text := ru.judgeConfig(config, *value); text != "" {
				refused = true
				j.refuse(Refusal{Topic: string([]byte(name)), ResourceType: topicResource,
					Code: codePolicyViolation, Condition: cond, Message: ru.message(text)})
			}
		})
	}
	j.coverDuplicates(len(resources), func(i int) string {
		if typ, name, _ := of(&resources[i]); typ == topicResource {
			return name
		}
		return "\x00" // no topic name: resources of other types are not judged
	}, topicResource)
}

// judgeConfig judges one config value; "" when it meets the rule or the
// rule says nothing of it.
func (ru *rule) judgeConfig(name, value string) (cond, text string) {
	c, ok := ru.Require.Configs[name]
	if !ok {
		return "", ""
	}
	cond = condConfigs + "." + name
	what := "configs " + name + " " + strconv.Quote(value)
	if len(c.OneOf) > 0 {
		for _, item := range strings.Split(value, ",") {
			if !contains(c.OneOf, strings.TrimSpace(item)) {
				return cond, what + " not one of [" + strings.Join(c.OneOf, ", ") + "]"
			}
		}
		return "", ""
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	if err != nil || math.IsNaN(n) {
		return cond, what + " is not a number"
	}
	if n == -1 && unlimitedAtMinusOne(name) {
		n = math.Inf(1) // -1 is "no limit": above any max, never below a min
	}
	what = "configs " + name + " " + strings.TrimSpace(value)
	if c.Min != nil && n < float64(*c.Min) {
		return cond, what + " below " + bound("min", *c.Min)
	}
	if c.Max != nil && n > float64(*c.Max) {
		return cond, what + " above " + bound("max", *c.Max)
	}
	return "", ""
}

// unlimitedAtMinusOne reports the topic configs for which -1 means no
// limit, so that "retention forever" is over any max.
func unlimitedAtMinusOne(name string) bool {
	switch name {
	case "retention.ms", "retention.bytes", "local.retention.ms", "local.retention.bytes":
		return true
	}
	return false
}

// judge says how n breaks the range, "" when it does not. A count left
// to the broker's default (-1) cannot be judged, so it fails the rule
// (a broker's own default may be anything).
func (g *Range) judge(name string, n int64) string {
	if g == nil {
		return ""
	}
	if n < 0 && name != condSessionTimeout {
		return name + " left to the broker's default; set it explicitly"
	}
	s := name + " " + strconv.FormatInt(n, 10)
	if g.Min != nil && n < *g.Min {
		return s + " below " + bound("min", *g.Min)
	}
	if g.Max != nil && n > *g.Max {
		return s + " above " + bound("max", *g.Max)
	}
	return ""
}
