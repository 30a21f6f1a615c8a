// This file holds how a content rule's refusal reaches the client: the
// request re-framed without the refused items (the rest still goes to
// the broker), the broker's answer with them added back, or, when
// nothing is left to forward, kproxy's own answer carrying every item's
// code and message.

package policy

import (
	"encoding/binary"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// WithoutRefused re-frames a request without the items a content rule
// refused: the same header (correlation id and client id) over a body
// re-encoded by kmsg.
func WithoutRefused(frame []byte, h framing.RequestHeader, req kmsg.Request, items []Refusal) []byte {
	var keep kmsg.Request
	refused := refusedSet(items)
	switch q := req.(type) {
	case *kmsg.ProduceRequest:
		drop := make([]Partition, len(items))
		for i, it := range items {
			drop[i] = Partition{Topic: it.Topic, TopicID: it.TopicID, Index: it.Partition}
		}
		return WithoutPartitions(frame, h, q, drop)
	case *kmsg.CreateTopicsRequest:
		k := *q
		k.Topics = unrefused(q.Topics, refused, func(t *kmsg.CreateTopicsRequestTopic) resourceKey { return resourceKey{t.Topic, 0} })
		keep = &k
	case *kmsg.CreatePartitionsRequest:
		k := *q
		k.Topics = unrefused(q.Topics, refused, func(t *kmsg.CreatePartitionsRequestTopic) resourceKey { return resourceKey{t.Topic, 0} })
		keep = &k
	case *kmsg.AlterConfigsRequest:
		k := *q
		k.Resources = unrefused(q.Resources, refused, func(r *kmsg.AlterConfigsRequestResource) resourceKey {
			return resourceKey{r.ResourceName, int8(r.ResourceType)}
		})
		keep = &k
	case *kmsg.IncrementalAlterConfigsRequest:
		k := *q
		k.Resources = unrefused(q.Resources, refused, func(r *kmsg.IncrementalAlterConfigsRequestResource) resourceKey {
			return resourceKey{r.ResourceName, int8(r.ResourceType)}
		})
		keep = &k
	default:
		return frame
	}
	out := append(make([]byte, 0, len(frame)), frame[:h.BodyOffset]...) // never larger than the request
	out = keep.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-framing.SizeLen))
	return out
}

// WithRefusals returns the broker's response frame with the refused items
// added, each with its code and message, so the client hears about every
// item it sent. A frame kproxy cannot decode goes back as it came.
func WithRefusals(frame []byte, key, version int16, items []Refusal) []byte {
	resp, err := framing.DecodeResponse(frame, key, version)
	if err != nil || resp == nil {
		return frame
	}
	addRefusals(resp, items)
	return EncodeResponse(resp, framing.ResponseCorrelationID(frame))
}

// RefusalResponse is kproxy's whole answer to a request a content rule
// refused entirely: every item with its refusal, or, for the group APIs,
// the request's code and message. ok is false when the version cannot
// carry the code.
func RefusalResponse(req kmsg.Request, v Verdict) (kmsg.Response, bool) {
	if len(v.Refusals) == 0 {
		resp, ok := ErrorResponse(req, v.Code)
		if ok && v.Message != "" {
			setMessage(resp, v.Message)
		}
		return resp, ok
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	addRefusals(resp, v.Refusals)
	return resp, true
}

// addRefusals appends the refused items to a response of their API.
func addRefusals(resp kmsg.Response, items []Refusal) {
	var topics map[produceTopic]int // a produce response's topics by name and id
	for i := range items {
		it := &items[i]
		msg := kmsg.StringPtr(it.Message)
		switch r := resp.(type) {
		case *kmsg.ProduceResponse:
			if topics == nil {
				topics = make(map[produceTopic]int, len(r.Topics))
				for j, t := range r.Topics {
					topics[produceTopic{t.Topic, t.TopicID}] = j
				}
			}
			addPartitionRefusal(r, it, topics)
		case *kmsg.CreateTopicsResponse:
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = it.Topic, it.Code, msg
			t.NumPartitions, t.ReplicationFactor = -1, -1
			r.Topics = append(r.Topics, t)
		case *kmsg.CreatePartitionsResponse:
			t := kmsg.NewCreatePartitionsResponseTopic()
			t.Topic, t.ErrorCode, t.ErrorMessage = it.Topic, it.Code, msg
			r.Topics = append(r.Topics, t)
		case *kmsg.AlterConfigsResponse:
			x := kmsg.NewAlterConfigsResponseResource()
			x.ResourceType, x.ResourceName = kmsg.ConfigResourceType(it.ResourceType), it.Topic
			x.ErrorCode, x.ErrorMessage = it.Code, msg
			r.Resources = append(r.Resources, x)
		case *kmsg.IncrementalAlterConfigsResponse:
			x := kmsg.NewIncrementalAlterConfigsResponseResource()
			x.ResourceType, x.ResourceName = kmsg.ConfigResourceType(it.ResourceType), it.Topic
			x.ErrorCode, x.ErrorMessage = it.Code, msg
			r.Resources = append(r.Resources, x)
		}
	}
}

// addPartitionRefusal adds one refused partition to a produce response,
// under its topic.
func addPartitionRefusal(r *kmsg.ProduceResponse, it *Refusal, topics map[produceTopic]int) {
	i, ok := topics[produceTopic{it.Topic, it.TopicID}]
	if !ok {
		t := kmsg.NewProduceResponseTopic()
		t.Topic, t.TopicID = it.Topic, it.TopicID
		i = len(r.Topics)
		topics[produceTopic{it.Topic, it.TopicID}] = i
		r.Topics = append(r.Topics, t)
	}
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition, p.ErrorCode, p.ErrorMessage = it.Partition, it.Code, kmsg.StringPtr(it.Message)
	p.BaseOffset, p.LogAppendTime, p.LogStartOffset = -1, -1, -1
	for _, e := range it.RecordErrors {
		re := kmsg.NewProduceResponseTopicPartitionErrorRecord()
		re.RelativeOffset, re.ErrorMessage = e.Index, kmsg.StringPtr(e.Message)
		p.ErrorRecords = append(p.ErrorRecords, re)
	}
	r.Topics[i].Partitions = append(r.Topics[i].Partitions, p)
}

// produceTopic names a produce response's topic.
type produceTopic struct {
	name string
	id   [16]byte
}

// unrefused is the items of a request that are not refused, in order.
func unrefused[T any](items []T, refused map[resourceKey]bool, key func(*T) resourceKey) []T {
	out := make([]T, 0, max(0, len(items)-len(refused)))
	for i := range items {
		if !refused[key(&items[i])] {
			out = append(out, items[i])
		}
	}
	return out
}

// resourceKey names a refused topic or config resource.
type resourceKey struct {
	name string
	typ  int8
}

// refusedSet indexes the refused items: a request may name 100,000
// topics, so they are never searched one by one.
func refusedSet(items []Refusal) map[resourceKey]bool {
	m := make(map[resourceKey]bool, len(items))
	for i := range items {
		m[resourceKey{items[i].Topic, items[i].ResourceType}] = true
	}
	return m
}

// setMessage sets a response's top-level error message where its type
// has one (ConsumerGroupHeartbeat does, JoinGroup does not); the version
// decides whether it is encoded.
func setMessage(resp kmsg.Response, msg string) {
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorMessage")
	if f.IsValid() && f.Type() == reflect.TypeOf((*string)(nil)) {
		f.Set(reflect.ValueOf(kmsg.StringPtr(msg)))
	}
}
