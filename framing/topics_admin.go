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
// leaders. A null topic list (every partition) names none.
func (w walk) replicas(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.ElectLeadersRequest:
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

// acls reports the topics ACL requests are about: a resource of type
// TOPIC names one (a prefixed pattern or "*" by its text; a filter with a
// null name or type ANY names none).
func (w walk) acls(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.DescribeACLsRequest:
		if r.ResourceType == kmsg.ACLResourceTypeTopic && r.ResourceName != nil {
			w.fn(*r.ResourceName, NoPartition)
		}
	case *kmsg.CreateACLsRequest:
		for _, c := range r.Creations {
			if c.ResourceType == kmsg.ACLResourceTypeTopic && !w.fn(c.ResourceName, NoPartition) {
				return
			}
		}
	case *kmsg.DeleteACLsRequest:
		for _, f := range r.Filters {
			if f.ResourceType == kmsg.ACLResourceTypeTopic && f.ResourceName != nil && !w.fn(*f.ResourceName, NoPartition) {
				return
			}
		}
	}
}
