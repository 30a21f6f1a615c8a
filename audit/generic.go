package audit

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// This file describes the requests of APIs that do not change cluster
// state, which are audited only when refused: by the groups,
// transactional ids and topics (with partitions) they name, never by
// what they carry.

// produce records a Produce's topics by name (v0-v12) or id (v13+) and
// partitions; the records are never read.
func produce(b *builder, req *kmsg.ProduceRequest) {
	b.expect(1 + len(req.Topics))
	if req.TransactionID != nil && *req.TransactionID != "" {
		b.named("transactional_id", *req.TransactionID)
	}
	for i := range req.Topics {
		t := &req.Topics[i]
		var r *resource
		if t.Topic != "" {
			r = b.topic(t.Topic)
		} else if r = b.add("topic"); r != nil {
			r.ID = uuid(t.TopicID)
			r.key = keyOf("topic_id", r.ID)
		}
		if r == nil {
			continue
		}
		for n := range t.Partitions {
			if b.keep(r, n, 4) {
				r.Partitions = append(r.Partitions, t.Partitions[n].Partition)
			}
		}
	}
}

// settleProduce gives each topic its partitions' first error.
func settleProduce(s *settler, resp *kmsg.ProduceResponse) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		c, m := firstCode(t.Partitions, func(p *kmsg.ProduceResponseTopicPartition) (int16, *string) {
			return p.ErrorCode, p.ErrorMessage
		})
		key := keyOf("topic", t.Topic)
		if t.Topic == "" {
			key = keyOf("topic_id", uuid(t.TopicID))
		}
		s.key(key, c, m)
	}
}

// settleGeneric is for responses with no per-resource map: with no error
// anywhere, every resource kproxy let through is NONE; with one, the
// line says which (error) and no resource is credited with it.
func settleGeneric(s *settler, resp kmsg.Response) {
	if code := framing.FirstError(resp); code != 0 {
		s.topErr = true
		s.ln.Error = codeName(code)
		return
	}
	s.all(0, nil)
}

// generic records the groups, transactional ids and topics of any other
// request. framing.EachTopic names the topics, those named by ids it has
// not learnt coming with no name; consecutive calls for one topic are its
// partitions.
func generic(b *builder, req kmsg.Request) {
	eachGroup(req, func(g string) { b.named("group", g) })
	eachTxn(req, func(id string) { b.named("transactional_id", id) })
	topics := make(map[string]int)
	last, lastOmitted := "", false
	framing.EachTopic(req, nil, func(topic string, partition int32) bool {
		if topic == last && lastOmitted {
			return true
		}
		i, ok := topics[topic]
		if !ok {
			last = topic
			r := b.add("topic")
			if lastOmitted = r == nil; lastOmitted {
				return true
			}
			if topic != framing.UnknownTopic {
				r.Name = b.str(topic)
				r.key = rkey{"topic", r.Name}
			}
			i = len(b.ln.Resources) - 1
			topics[topic] = i
		}
		if partition != framing.NoPartition {
			r := &b.ln.Resources[i]
			if b.keep(r, len(r.Partitions)+r.Omitted, 4) {
				r.Partitions = append(r.Partitions, partition)
			}
		}
		return true
	})
}

// eachGroup calls fn with each group id req names.
func eachGroup(req kmsg.Request, fn func(string)) {
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		fn(r.Group)
	case *kmsg.OffsetFetchRequest:
		if r.Group != "" {
			fn(r.Group)
		}
		for i := range r.Groups {
			fn(r.Groups[i].Group)
		}
	case *kmsg.FindCoordinatorRequest:
		if r.CoordinatorType == 0 { // 1 is a transaction coordinator, 2 a share one
			if r.CoordinatorKey != "" {
				fn(r.CoordinatorKey)
			}
			for _, k := range r.CoordinatorKeys {
				fn(k)
			}
		}
	case *kmsg.JoinGroupRequest:
		fn(r.Group)
	case *kmsg.HeartbeatRequest:
		fn(r.Group)
	case *kmsg.LeaveGroupRequest:
		fn(r.Group)
	case *kmsg.SyncGroupRequest:
		fn(r.Group)
	case *kmsg.DescribeGroupsRequest:
		for _, g := range r.Groups {
			fn(g)
		}
	case *kmsg.AddOffsetsToTxnRequest:
		fn(r.Group)
	case *kmsg.TxnOffsetCommitRequest:
		fn(r.Group)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		fn(r.Group)
	case *kmsg.ConsumerGroupDescribeRequest:
		for _, g := range r.Groups {
			fn(g)
		}
	case *kmsg.ShareGroupHeartbeatRequest:
		fn(r.GroupID)
	case *kmsg.ShareGroupDescribeRequest:
		for _, g := range r.GroupIDs {
			fn(g)
		}
	case *kmsg.ShareFetchRequest:
		if r.GroupID != nil {
			fn(*r.GroupID)
		}
	case *kmsg.ShareAcknowledgeRequest:
		if r.GroupID != nil {
			fn(*r.GroupID)
		}
	case *kmsg.StreamsGroupHeartbeatRequest:
		fn(r.Group)
	case *kmsg.StreamsGroupDescribeRequest:
		for _, g := range r.Groups {
			fn(g)
		}
	case *kmsg.StreamsGroupTopologyDescriptionUpdateRequest:
		fn(r.Group)
	case *kmsg.DescribeShareGroupOffsetsRequest:
		for i := range r.Groups {
			fn(r.Groups[i].GroupID)
		}
	}
}

// eachTxn calls fn with each transactional id req names.
func eachTxn(req kmsg.Request, fn func(string)) {
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil && *r.TransactionalID != "" {
			fn(*r.TransactionalID)
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.TransactionalID != "" {
			fn(r.TransactionalID)
		}
		for i := range r.Transactions {
			fn(r.Transactions[i].TransactionalID)
		}
	case *kmsg.AddOffsetsToTxnRequest:
		fn(r.TransactionalID)
	case *kmsg.EndTxnRequest:
		fn(r.TransactionalID)
	case *kmsg.TxnOffsetCommitRequest:
		fn(r.TransactionalID)
	case *kmsg.FindCoordinatorRequest:
		if r.CoordinatorType == 1 {
			if r.CoordinatorKey != "" {
				fn(r.CoordinatorKey)
			}
			for _, k := range r.CoordinatorKeys {
				fn(k)
			}
		}
	}
}
