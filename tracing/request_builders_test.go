package tracing

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Builders for the requests the tests decode and trace.

func produceReq(version int16, topics ...kmsg.ProduceRequestTopic) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Version, r.Acks, r.Topics = version, -1, topics
	return r
}

// produceTopic has one partition per records section given.
func produceTopic(name string, id [16]byte, partitions ...[]byte) kmsg.ProduceRequestTopic {
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic, tp.TopicID = name, id
	for i, recs := range partitions {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition, p.Records = int32(i), recs
		tp.Partitions = append(tp.Partitions, p)
	}
	return tp
}

func fetchReq(version int16, name string, id [16]byte, partitions ...int32) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version = version
	tp := kmsg.NewFetchRequestTopic()
	tp.Topic, tp.TopicID = name, id
	for _, p := range partitions {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p
		tp.Partitions = append(tp.Partitions, fp)
	}
	r.Topics = append(r.Topics, tp)
	return r
}

func offsetCommitReq(version int16, group string, topics map[string][]int32) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group = version, group
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		tp := kmsg.NewOffsetCommitRequestTopic()
		tp.Topic = name
		for _, p := range topics[name] {
			pp := kmsg.NewOffsetCommitRequestTopicPartition()
			pp.Partition = p
			tp.Partitions = append(tp.Partitions, pp)
		}
		r.Topics = append(r.Topics, tp)
	}
	return r
}
