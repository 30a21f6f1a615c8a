package framing

import "github.com/twmb/franz-go/pkg/kmsg"

// NoPartition is passed to EachTopic's fn for a topic named without
// partitions.
const NoPartition int32 = -1

// EachTopic calls fn with every topic (and partition) a request names, in
// order, resolving topic ids through ids, until fn returns false. Names
// alias the request's frame: clone any that outlive it. Requests of APIs
// that name no topics give no calls.
func EachTopic(req kmsg.Request, ids *TopicIDs, fn func(topic string, partition int32) bool) {
	name := func(topic string, id [16]byte) string {
		if topic == "" {
			return ids.Name(id)
		}
		return topic
	}
	parts := func(topic string, ps []int32) bool {
		if len(ps) == 0 {
			return fn(topic, NoPartition)
		}
		for _, p := range ps {
			if !fn(topic, p) {
				return false
			}
		}
		return true
	}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if !fn(name(t.Topic, t.TopicID), p.Partition) {
					return
				}
			}
		}
	case *kmsg.FetchRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if !fn(name(t.Topic, t.TopicID), p.Partition) {
					return
				}
			}
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if !fn(t.Topic, p.Partition) {
					return
				}
			}
		}
	case *kmsg.MetadataRequest:
		for _, t := range r.Topics {
			if t.Topic != nil && !fn(*t.Topic, NoPartition) {
				return
			}
		}
	case *kmsg.OffsetCommitRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if !fn(name(t.Topic, t.TopicID), p.Partition) {
					return
				}
			}
		}
	case *kmsg.TxnOffsetCommitRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if !fn(t.Topic, p.Partition) {
					return
				}
			}
		}
	case *kmsg.OffsetFetchRequest:
		for _, t := range r.Topics {
			if !parts(t.Topic, t.Partitions) {
				return
			}
		}
		for _, g := range r.Groups {
			for _, t := range g.Topics {
				if !parts(t.Topic, t.Partitions) {
					return
				}
			}
		}
	case *kmsg.OffsetDeleteRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if !fn(t.Topic, p.Partition) {
					return
				}
			}
		}
	case *kmsg.AddPartitionsToTxnRequest:
		for _, t := range r.Topics {
			if !parts(t.Topic, t.Partitions) {
				return
			}
		}
		for _, tx := range r.Transactions {
			for _, t := range tx.Topics {
				if !parts(t.Topic, t.Partitions) {
					return
				}
			}
		}
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			if !fn(t.Topic, NoPartition) {
				return
			}
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			if !fn(t.Topic, NoPartition) {
				return
			}
		}
	case *kmsg.DeleteTopicsRequest:
		for _, t := range r.TopicNames {
			if !fn(t, NoPartition) {
				return
			}
		}
		for _, t := range r.Topics {
			topic := ""
			if t.Topic != nil {
				topic = *t.Topic
			}
			if topic = name(topic, t.TopicID); topic != "" && !fn(topic, NoPartition) {
				return
			}
		}
	case *kmsg.DeleteRecordsRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if !fn(t.Topic, p.Partition) {
					return
				}
			}
		}
	}
}
