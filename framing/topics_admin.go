package framing

import "github.com/twmb/franz-go/pkg/kmsg"

// admin reports the topics of the admin APIs: creating, deleting and
// describing topics, their configs, ACLs, replicas and leaders.
func (w walk) admin(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			if !w.topic(t.Topic, [16]byte{}) {
				return
			}
		}
	case *kmsg.DeleteTopicsRequest:
		if !w.names(r.TopicNames) {
			return
		}
		for _, t := range r.Topics {
			if !w.nullable(t.Topic, t.TopicID) {
				return
			}
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			if !w.topic(t.Topic, [16]byte{}) {
				return
			}
		}
	case *kmsg.DeleteRecordsRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, [16]byte{}, t.Partitions, func(p *kmsg.DeleteRecordsRequestTopicPartition) int32 { return p.Partition }) {
				return
			}
		}
	case *kmsg.DescribeTopicPartitionsRequest:
		for _, t := range r.Topics {
			if !w.topic(t.Topic, [16]byte{}) {
				return
			}
		}
		if r.Cursor != nil { // where a listing of every topic starts
			w.fn(r.Cursor.Topic, r.Cursor.Partition)
		}
	case *kmsg.DescribeConfigsRequest:
		for _, c := range r.Resources {
			if c.ResourceType == kmsg.ConfigResourceTypeTopic && !w.topic(c.ResourceName, [16]byte{}) {
				return
			}
		}
	case *kmsg.AlterConfigsRequest:
		for _, c := range r.Resources {
			if c.ResourceType == kmsg.ConfigResourceTypeTopic && !w.topic(c.ResourceName, [16]byte{}) {
				return
			}
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		for _, c := range r.Resources {
			if c.ResourceType == kmsg.ConfigResourceTypeTopic && !w.topic(c.ResourceName, [16]byte{}) {
				return
			}
		}
	default:
		if !w.replicas(req) {
			w.acls(req)
		}
	}
}

// replicas reports the topics of the APIs that move replicas and elect
// leaders. A null topic list asks for every partition: in the lists that
// only read (ListPartitionReassignments, DescribeLogDirs) it names none,
// in ElectLeaders, which moves leaders, UnknownTopic.
func (w walk) replicas(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.ElectLeadersRequest:
		if r.Topics == nil { // kmsg decodes null as nil, an empty list as empty
			w.fn(UnknownTopic, NoPartition)
		}
		for _, t := range r.Topics {
			if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
				break
			}
		}
	case *kmsg.AlterPartitionAssignmentsRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, [16]byte{}, t.Partitions, func(p *kmsg.AlterPartitionAssignmentsRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	case *kmsg.ListPartitionReassignmentsRequest:
		for _, t := range r.Topics {
			if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
				break
			}
		}
	case *kmsg.DescribeLogDirsRequest:
		for _, t := range r.Topics {
			if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
				break
			}
		}
	case *kmsg.AlterReplicaLogDirsRequest:
		for _, d := range r.Dirs {
			for _, t := range d.Topics {
				if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
					return true
				}
			}
		}
	case *kmsg.DescribeQuorumRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, [16]byte{}, t.Partitions, func(p *kmsg.DescribeQuorumRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	default:
		return false
	}
	return true
}

// acls reports the topics ACL requests are about. A filter or binding
// that can cover a topic (resource type TOPIC or ANY) names it when it
// says one topic: a LITERAL pattern and a name other than "*". Any other
// (a null name, "*", which a broker takes as every topic, a PREFIXED,
// MATCH or ANY pattern) may cover any topic: UnknownTopic. DescribeAcls
// only reads, but is judged the same way, so that a rule hiding a topic
// hides its ACLs too. Versions before the pattern type read as LITERAL
// (kmsg's default), as the broker reads them.
func (w walk) acls(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.DescribeACLsRequest:
		w.acl(r.ResourceType, r.ResourceName, r.ResourcePatternType)
	case *kmsg.CreateACLsRequest:
		for i := range r.Creations {
			c := &r.Creations[i]
			if !w.acl(c.ResourceType, &c.ResourceName, c.ResourcePatternType) {
				return
			}
		}
	case *kmsg.DeleteACLsRequest:
		for _, f := range r.Filters {
			if !w.acl(f.ResourceType, f.ResourceName, f.ResourcePatternType) {
				return
			}
		}
	}
}

// acl reports the topic one ACL binding or filter covers, if it can cover
// topics at all.
func (w walk) acl(typ kmsg.ACLResourceType, name *string, pattern kmsg.ACLResourcePatternType) bool {
	switch {
	case typ != kmsg.ACLResourceTypeTopic && typ != kmsg.ACLResourceTypeAny:
		return true
	case name == nil || *name == "*" || pattern != kmsg.ACLResourcePatternTypeLiteral:
		return w.fn(UnknownTopic, NoPartition)
	}
	return w.fn(*name, NoPartition)
}
