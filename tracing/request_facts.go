package tracing

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// facts are what a span says about a request beyond its header.
type facts struct {
	topics     []string // distinct names, cloned out of the frame
	partitions int      // partition entries across topics
	partition  int32    // the partition, when exactly one
	group      string
	records    int // records in produced batches, from batch headers
	batches    [][]byte
}

// topic notes a topic name (empty for topic-id-only versions) and its
// partitions.
func (f *facts) topic(name string, partitions ...int32) {
	if name != "" && !contains(f.topics, name) {
		f.topics = append(f.topics, strings.Clone(name))
	}
	for _, p := range partitions {
		f.partitions++
		f.partition = p
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// requestFacts reads the facts of the main APIs; other APIs give none.
// Strings are cloned: the request aliases a frame that is released once
// relayed, while the span is exported later.
func requestFacts(req kmsg.Request, ids *framing.TopicIDs) facts {
	var f facts
	name := func(topic string, id [16]byte) string {
		if topic == "" {
			return ids.Name(id)
		}
		return topic
	}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				f.topic(name(t.Topic, t.TopicID), p.Partition)
				f.records += batchRecordCount(p.Records)
				f.batches = append(f.batches, p.Records)
			}
		}
	case *kmsg.FetchRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				f.topic(name(t.Topic, t.TopicID), p.Partition)
			}
		}
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				f.topic(t.Topic, p.Partition)
			}
		}
	case *kmsg.MetadataRequest:
		for _, t := range r.Topics {
			if t.Topic != nil {
				f.topic(*t.Topic)
			}
		}
	case *kmsg.OffsetCommitRequest:
		f.group = r.Group
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				f.topic(name(t.Topic, t.TopicID), p.Partition)
			}
		}
	case *kmsg.TxnOffsetCommitRequest:
		f.group = r.Group
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				f.topic(t.Topic, p.Partition)
			}
		}
	case *kmsg.OffsetFetchRequest:
		f.group = r.Group
		for _, t := range r.Topics {
			f.topic(t.Topic, t.Partitions...)
		}
		if len(r.Groups) == 1 {
			f.group = r.Groups[0].Group
			for _, t := range r.Groups[0].Topics {
				f.topic(t.Topic, t.Partitions...)
			}
		}
	case *kmsg.OffsetDeleteRequest:
		f.group = r.Group
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				f.topic(t.Topic, p.Partition)
			}
		}
	case *kmsg.AddPartitionsToTxnRequest:
		for _, t := range r.Topics {
			f.topic(t.Topic, t.Partitions...)
		}
		for _, tx := range r.Transactions {
			for _, t := range tx.Topics {
				f.topic(t.Topic, t.Partitions...)
			}
		}
	case *kmsg.JoinGroupRequest:
		f.group = r.Group
	case *kmsg.SyncGroupRequest:
		f.group = r.Group
	case *kmsg.HeartbeatRequest:
		f.group = r.Group
	case *kmsg.LeaveGroupRequest:
		f.group = r.Group
	case *kmsg.ConsumerGroupHeartbeatRequest:
		f.group = r.Group
	case *kmsg.AddOffsetsToTxnRequest:
		f.group = r.Group
	case *kmsg.DescribeGroupsRequest:
		if len(r.Groups) == 1 {
			f.group = r.Groups[0]
		}
	case *kmsg.DeleteGroupsRequest:
		if len(r.Groups) == 1 {
			f.group = r.Groups[0]
		}
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			f.topic(t.Topic)
		}
	case *kmsg.DeleteTopicsRequest:
		for _, t := range r.TopicNames {
			f.topic(t)
		}
		for _, t := range r.Topics {
			if t.Topic != nil {
				f.topic(*t.Topic)
			}
		}
	}
	f.group = strings.Clone(f.group)
	return f
}

// operationType is the messaging operation type of an API, where one fits.
func operationType(key int16) string {
	switch key {
	case 0: // Produce
		return "send"
	case 1: // Fetch
		return "receive"
	case 8, 28: // OffsetCommit, TxnOffsetCommit
		return "settle"
	}
	return ""
}
