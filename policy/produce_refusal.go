package policy

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// ProduceRefusal is the response a broker would send to a Produce naming
// parts if it refused every partition with code. It is built straight
// from the partitions read off a streamed body, without decoding a request
// or mirroring one by reflection: the only cost is the answer itself.
func ProduceRefusal(version int16, parts []framing.ProducePartition, code int16) *kmsg.ProduceResponse {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = version
	for len(parts) > 0 {
		n := 1 // the run of partitions of the same topic
		for n < len(parts) && parts[n].Topic == parts[0].Topic && parts[n].TopicID == parts[0].TopicID {
			n++
		}
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = parts[0].Topic, parts[0].TopicID
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, n)
		for i := range t.Partitions {
			t.Partitions[i].Default()
			t.Partitions[i].Partition, t.Partitions[i].ErrorCode = parts[i].Partition, code
		}
		resp.Topics = append(resp.Topics, t)
		parts = parts[n:]
	}
	return resp
}
