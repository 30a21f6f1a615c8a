package policy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// Every Produce version's refusal names each partition under its topic
// (by name, or by id from v13) with the code, as a client reads it back.
func TestProduceRefusalEveryVersion(t *testing.T) {
	parts := []framing.ProducePartition{
		{Topic: "a", TopicID: [16]byte{1}, Partition: 0},
		{Topic: "a", TopicID: [16]byte{1}, Partition: 3},
		{Topic: "b", TopicID: [16]byte{2}, Partition: 1},
	}
	for v := int16(0); v <= kmsg.NewPtrProduceResponse().MaxVersion(); v++ {
		back := kmsg.NewPtrProduceResponse()
		back.Version = v
		if err := back.ReadFrom(ProduceRefusal(v, parts, 10).AppendTo(nil)); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		var got []framing.ProducePartition
		for _, tp := range back.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 10 {
					t.Fatalf("v%d: partition %d has error %d, want 10", v, p.Partition, p.ErrorCode)
				}
				got = append(got, framing.ProducePartition{Topic: tp.Topic, TopicID: tp.TopicID, Partition: p.Partition})
			}
		}
		if len(got) != len(parts) {
			t.Fatalf("v%d: %d partitions, want %d", v, len(got), len(parts))
		}
		for i, p := range got {
			want := parts[i]
			if v >= 13 {
				want.Topic = ""
			} else {
				want.TopicID = [16]byte{}
			}
			if p != want {
				t.Fatalf("v%d: partition %d is %+v, want %+v", v, i, p, want)
			}
		}
	}
}
