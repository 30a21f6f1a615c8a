package audit

import "github.com/twmb/franz-go/pkg/kmsg"

// This file describes the group APIs that change state: deleting groups
// and deleting or moving a group's offsets. Each of the offset APIs is
// recorded as the group, then the topics it touches.

func deleteGroups(b *builder, req *kmsg.DeleteGroupsRequest) {
	b.expect(len(req.Groups))
	for _, g := range req.Groups {
		b.named("group", g)
	}
}

func offsetDelete(b *builder, req *kmsg.OffsetDeleteRequest) {
	b.expect(1 + len(req.Topics))
	b.named("group", req.Group)
	for i := range req.Topics {
		t := &req.Topics[i]
		r := b.topic(t.Topic)
		if r == nil {
			continue
		}
		for n, p := range t.Partitions {
			if b.keep(r, n, 4) {
				r.Partitions = append(r.Partitions, p.Partition)
			}
		}
	}
}

// settleGroup gives the group resource the request-level code, which is
// the group's own.
func settleGroup(s *settler, code int16, msg *string) {
	for _, i := range s.find(groupKey(s)) {
		s.set(i, code, msg)
	}
	s.top(code, msg)
}

// groupKey is the key of the first group resource of the line.
func groupKey(s *settler) rkey {
	for i := range s.b.described {
		if r := &s.ln.Resources[i]; r.Type == "group" {
			return r.key
		}
	}
	return rkey{}
}

func settleOffsetDelete(s *settler, resp *kmsg.OffsetDeleteResponse) {
	settleGroup(s, resp.ErrorCode, nil)
	if resp.ErrorCode != 0 {
		return
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		c, _ := firstCode(t.Partitions, func(p *kmsg.OffsetDeleteResponseTopicPartition) (int16, *string) { return p.ErrorCode, nil })
		s.key(keyOf("topic", t.Topic), c, nil)
	}
}

func alterShareOffsets(b *builder, req *kmsg.AlterShareGroupOffsetsRequest) {
	b.expect(1 + len(req.Topics))
	b.named("group", req.GroupID)
	for i := range req.Topics {
		t := &req.Topics[i]
		r := b.topic(t.Topic)
		if r == nil {
			continue
		}
		for n, p := range t.Partitions {
			b.offset(r, n, p.Partition, p.StartOffset)
		}
	}
}

func settleAlterShareOffsets(s *settler, resp *kmsg.AlterShareGroupOffsetsResponse) {
	settleGroup(s, resp.ErrorCode, resp.ErrorMessage)
	if resp.ErrorCode != 0 {
		return
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		c, m := firstCode(t.Partitions, func(p *kmsg.AlterShareGroupOffsetsResponseTopicPartition) (int16, *string) {
			return p.ErrorCode, p.ErrorMessage
		})
		s.key(keyOf("topic", t.Topic), c, m)
	}
}

func deleteShareOffsets(b *builder, req *kmsg.DeleteShareGroupOffsetsRequest) {
	b.expect(1 + len(req.Topics))
	b.named("group", req.GroupID)
	for i := range req.Topics {
		b.topic(req.Topics[i].Topic)
	}
}

func settleDeleteShareOffsets(s *settler, resp *kmsg.DeleteShareGroupOffsetsResponse) {
	settleGroup(s, resp.ErrorCode, resp.ErrorMessage)
	if resp.ErrorCode != 0 {
		return
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		s.key(keyOf("topic", t.Topic), t.ErrorCode, t.ErrorMessage)
	}
}
