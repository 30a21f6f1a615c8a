package framing

import (
	"errors"
	"strings"
	"testing"

	"github.com/cloudwego/netpoll"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StreamProduce finds every topic, partition and the acks of a Produce of
// each version while dropping the records, and consumes exactly the frame.
func TestStreamProduceEveryVersion(t *testing.T) {
	for v := int16(0); v <= kmsg.NewPtrProduceRequest().MaxVersion(); v++ {
		req := kmsg.NewPtrProduceRequest()
		req.Version = v
		req.Acks = -1
		if v >= 3 {
			id := "txn"
			req.TransactionID = &id
		}
		for ti, name := range []string{"a", "bb"} {
			topic := kmsg.NewProduceRequestTopic()
			topic.Topic = name
			topic.TopicID[0] = byte(ti + 1)
			for p := int32(0); p < 2; p++ {
				part := kmsg.NewProduceRequestTopicPartition()
				part.Partition = p + 10*int32(ti)
				part.Records = make([]byte, 100_000+int(p))
				topic.Partitions = append(topic.Partitions, part)
			}
			req.Topics = append(req.Topics, topic)
		}
		body := req.AppendTo(nil)
		buf := netpoll.NewLinkBuffer()
		buf.WriteBinary(append(body, 0xEE)) // a byte of the next frame
		buf.Flush()
		acks, parts, err := StreamProduce(NewStream(buf, len(body)), v, 1<<20)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if acks != -1 || len(parts) != 4 {
			t.Fatalf("v%d: acks %d, %d partitions", v, acks, len(parts))
		}
		want := []int32{0, 1, 10, 11}
		for i, p := range parts {
			if p.Partition != want[i] {
				t.Fatalf("v%d: partition %d is %d, want %d", v, i, p.Partition, want[i])
			}
			if v < 13 && p.Topic == "" || v >= 13 && p.TopicID == ([16]byte{}) {
				t.Fatalf("v%d: partition %d lost its topic: %+v", v, i, p)
			}
		}
		if buf.Len() != 1 {
			t.Fatalf("v%d: %d bytes left, want the next frame's 1", v, buf.Len())
		}
	}
}

// A Produce naming more topics and partitions than the budget keeps is
// given up as soon as the budget is spent, with the rest of the frame left
// unread: neither the partitions nor long topic names are all kept.
func TestStreamProduceStopsPastBudget(t *testing.T) {
	wide := kmsg.NewPtrProduceRequest()
	wide.Version, wide.Acks = 9, -1
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "t"
	for p := int32(0); p < 100_000; p++ {
		part := kmsg.NewProduceRequestTopicPartition()
		part.Partition = p
		topic.Partitions = append(topic.Partitions, part)
	}
	wide.Topics = append(wide.Topics, topic)
	long := kmsg.NewPtrProduceRequest()
	long.Version, long.Acks = 7, -1
	for i := 0; i < 100; i++ {
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = strings.Repeat(string(rune('a'+i%26)), 30_000)
		topic.Partitions = append(topic.Partitions, kmsg.NewProduceRequestTopicPartition())
		long.Topics = append(long.Topics, topic)
	}
	for name, req := range map[string]*kmsg.ProduceRequest{"100k partitions": wide, "100 topics of 30 kB names": long} {
		body := req.AppendTo(nil)
		buf := netpoll.NewLinkBuffer()
		buf.WriteBinary(body)
		buf.Flush()
		_, parts, err := StreamProduce(NewStream(buf, len(body)), req.Version, 256<<10)
		if !errors.Is(err, ErrTooWide) || parts != nil {
			t.Fatalf("%s: %d partitions, error %v; want ErrTooWide", name, len(parts), err)
		}
		if read := len(body) - buf.Len(); read > len(body)/2 {
			t.Fatalf("%s: read %d of %d bytes before giving up", name, read, len(body))
		}
	}
}
