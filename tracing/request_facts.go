package tracing

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/records"
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

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// requestFacts reads the facts of a request: the topics of every API that
// names any (framing.EachTopic), records and groups of the main ones.
// Strings are cloned: the request aliases a frame that is released once
// relayed, while the span is exported later.
func requestFacts(req kmsg.Request, ids *framing.TopicIDs) facts {
	var f facts
	framing.EachTopic(req, ids, func(topic string, partition int32) bool {
		if topic != "" && !contains(f.topics, topic) {
			f.topics = append(f.topics, strings.Clone(topic))
		}
		if partition != framing.NoPartition {
			f.partitions++
			f.partition = partition
		}
		return true
	})
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				f.records += records.RecordCount(p.Records)
				f.batches = append(f.batches, p.Records)
			}
		}
	case *kmsg.OffsetCommitRequest:
		f.group = r.Group
	case *kmsg.TxnOffsetCommitRequest:
		f.group = r.Group
	case *kmsg.OffsetFetchRequest:
		f.group = r.Group
		if len(r.Groups) == 1 {
			f.group = r.Groups[0].Group
		}
	case *kmsg.OffsetDeleteRequest:
		f.group = r.Group
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
	}
	f.group = strings.Clone(f.group)
	return f
}

// operationType is the messaging operation type of an API, where one fits.
func operationType(key int16) string {
	switch key {
	case framing.KeyProduce:
		return "send"
	case framing.KeyFetch:
		return "receive"
	case framing.KeyOffsetCommit, framing.KeyTxnOffsetCommit:
		return "settle"
	}
	return ""
}
