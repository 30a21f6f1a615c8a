package policy

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// Partition names one partition of a produce request.
type Partition struct {
	Topic   string
	TopicID [16]byte
	Index   int32
}

// oversizePartitions lists the partitions of a produce whose batch is over
// the rule's size limits. Names are cloned: they outlive the frame.
func oversizePartitions(req *kmsg.ProduceRequest, l Limits) []Partition {
	var out []Partition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if (l.MaxBatchBytes > 0 && len(p.Records) > l.MaxBatchBytes) ||
				(l.MaxBatchRecords > 0 && recordCount(p.Records) > l.MaxBatchRecords) {
				out = append(out, Partition{Topic: string([]byte(t.Topic)), TopicID: t.TopicID, Index: p.Partition})
			}
		}
	}
	return out
}

// recordCount sums records_count (offset 57) over the magic-2 batches.
func recordCount(records []byte) int {
	n := 0
	for len(records) >= 61 {
		size := 12 + int(int32(binary.BigEndian.Uint32(records[8:])))
		if size < 61 || size > len(records) {
			break
		}
		n += int(int32(binary.BigEndian.Uint32(records[57:])))
		records = records[size:]
	}
	return n
}

// partitionsOf lists the partitions of a produce whose topic (resolved
// through ids when named by id) satisfies keep.
func partitionsOf(req *kmsg.ProduceRequest, ids *framing.TopicIDs, keep func(topic string) bool) []Partition {
	var out []Partition
	for _, t := range req.Topics {
		name := t.Topic
		if name == "" {
			name = ids.Name(t.TopicID)
		}
		if !keep(name) {
			continue
		}
		for _, p := range t.Partitions {
			out = append(out, Partition{Topic: string([]byte(t.Topic)), TopicID: t.TopicID, Index: p.Partition})
		}
	}
	return out
}

// WithoutPartitions re-frames a produce request without the refused
// partitions: the same header (and so correlation id and client id) over
// a body re-encoded by kmsg.
func WithoutPartitions(frame []byte, h framing.RequestHeader, req *kmsg.ProduceRequest, drop []Partition) []byte {
	keep := *req
	keep.Topics = nil
	dropped := make(map[Partition]bool, len(drop)) // never searched one by one
	for _, d := range drop {
		dropped[d] = true
	}
	for _, t := range req.Topics {
		nt := t
		nt.Partitions = nil
		for _, p := range t.Partitions {
			if !dropped[Partition{Topic: t.Topic, TopicID: t.TopicID, Index: p.Partition}] {
				nt.Partitions = append(nt.Partitions, p)
			}
		}
		if len(nt.Partitions) > 0 {
			keep.Topics = append(keep.Topics, nt)
		}
	}
	out := append([]byte(nil), frame[:h.BodyOffset]...)
	out = keep.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-framing.SizeLen))
	return out
}

// WithRefusedPartitions returns a produce response frame with the refused
// partitions added, each with code, so the client hears about every
// partition it sent.
func WithRefusedPartitions(frame []byte, version int16, drop []Partition, code int16) []byte {
	resp, err := framing.DecodeResponse(frame, framing.KeyProduce, version)
	if err != nil || resp == nil {
		return frame
	}
	r := resp.(*kmsg.ProduceResponse)
	for _, d := range drop {
		i := 0
		for ; i < len(r.Topics); i++ {
			if r.Topics[i].Topic == d.Topic && r.Topics[i].TopicID == d.TopicID {
				break
			}
		}
		if i == len(r.Topics) {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = d.Topic, d.TopicID
			r.Topics = append(r.Topics, t)
		}
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition, p.ErrorCode = d.Index, code
		r.Topics[i].Partitions = append(r.Topics[i].Partitions, p)
	}
	return EncodeResponse(r, framing.ResponseCorrelationID(frame))
}
