package audit

import "github.com/twmb/franz-go/pkg/kmsg"

// This file describes the topic and partition APIs, and settles the ones
// whose responses need more than a per-topic code.

func createTopics(b *builder, req *kmsg.CreateTopicsRequest) {
	b.expect(len(req.Topics))
	b.ln.ValidateOnly = req.ValidateOnly
	for i := range req.Topics {
		t := &req.Topics[i]
		r := b.topic(t.Topic)
		if r == nil {
			continue
		}
		r.NumPartitions, r.ReplicationFactor = t.NumPartitions, t.ReplicationFactor
		for n := range t.ReplicaAssignment {
			a := &t.ReplicaAssignment[n]
			b.replicas(r, n, a.Partition, a.Replicas)
		}
		for n := range t.Configs {
			b.config(r, n, t.Configs[n].Name, t.Configs[n].Value, "")
		}
	}
}

// deleteTopics records topics by name (v0-v5, and v6+ when named) or by
// id, matched by id when the request has no name.
func deleteTopics(b *builder, req *kmsg.DeleteTopicsRequest) {
	b.expect(len(req.TopicNames) + len(req.Topics))
	for _, name := range req.TopicNames {
		b.topic(name)
	}
	for i := range req.Topics {
		t := &req.Topics[i]
		if t.Topic != nil && *t.Topic != "" {
			if r := b.topic(*t.Topic); r != nil {
				r.ID = uuid(t.TopicID)
			}
			continue
		}
		if r := b.add("topic"); r != nil {
			r.ID = uuid(t.TopicID)
			r.key = keyOf("topic_id", r.ID)
		}
	}
}

// settleDeleteTopics matches by name, then by id; a topic deleted by id
// takes the name the broker answers with.
func settleDeleteTopics(s *settler, resp *kmsg.DeleteTopicsResponse) {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != nil {
			if len(s.find(keyOf("topic", *t.Topic))) > 0 {
				s.key(keyOf("topic", *t.Topic), t.ErrorCode, t.ErrorMessage)
				continue
			}
		}
		key := keyOf("topic_id", uuid(t.TopicID))
		idx := s.find(key)
		if t.Topic != nil && *t.Topic != "" {
			for _, j := range idx {
				if r := &s.ln.Resources[j]; r.Name == "" {
					r.Name = s.b.str(*t.Topic)
				}
			}
		}
		s.key(key, t.ErrorCode, t.ErrorMessage)
	}
}

func createPartitions(b *builder, req *kmsg.CreatePartitionsRequest) {
	b.expect(len(req.Topics))
	b.ln.ValidateOnly = req.ValidateOnly
	for i := range req.Topics {
		if r := b.topic(req.Topics[i].Topic); r != nil {
			r.Count = req.Topics[i].Count
		}
	}
}

func deleteRecords(b *builder, req *kmsg.DeleteRecordsRequest) {
	b.expect(len(req.Topics))
	for i := range req.Topics {
		t := &req.Topics[i]
		r := b.topic(t.Topic)
		if r == nil {
			continue
		}
		for n, p := range t.Partitions {
			b.offset(r, n, p.Partition, p.Offset)
		}
	}
}

// electLeaders records a null topic list (every partition) as one
// all_topics resource.
func electLeaders(b *builder, req *kmsg.ElectLeadersRequest) {
	election := "preferred"
	if req.ElectionType == 1 {
		election = "unclean"
	}
	if req.Topics == nil {
		if r := b.add("all_topics"); r != nil {
			r.Election = election
			r.key = keyOf("all_topics", "")
		}
		return
	}
	for i := range req.Topics {
		t := &req.Topics[i]
		if r := b.topic(t.Topic); r != nil {
			r.Election = election
			b.partitions(r, t.Partitions)
		}
	}
}

// settleElect folds an election of every partition into its one
// resource: the first error of any partition, else NONE.
func settleElect(s *settler, resp *kmsg.ElectLeadersResponse) {
	s.top(resp.ErrorCode, nil)
	all := keyOf("all_topics", "")
	var first int16
	var msg *string
	for i := range resp.Topics {
		t := &resp.Topics[i]
		c, m := firstCode(t.Partitions, func(p *kmsg.ElectLeadersResponseTopicPartition) (int16, *string) {
			return p.ErrorCode, p.ErrorMessage
		})
		if len(s.find(all)) == 0 {
			s.key(keyOf("topic", t.Topic), c, m)
		} else if first == 0 {
			first, msg = c, m
		}
	}
	if len(s.find(all)) > 0 && !s.topErr {
		s.key(all, first, msg)
	}
}

func alterAssignments(b *builder, req *kmsg.AlterPartitionAssignmentsRequest) {
	b.expect(len(req.Topics))
	for i := range req.Topics {
		t := &req.Topics[i]
		r := b.topic(t.Topic)
		if r == nil {
			continue
		}
		for n := range t.Partitions {
			p := &t.Partitions[n]
			b.replicas(r, n, p.Partition, p.Replicas)
		}
	}
}

// alterLogDirs records one resource per directory and topic: the same
// topic may move partitions to several directories.
func alterLogDirs(b *builder, req *kmsg.AlterReplicaLogDirsRequest) {
	for i := range req.Dirs {
		d := &req.Dirs[i]
		for j := range d.Topics {
			t := &d.Topics[j]
			if r := b.topic(t.Topic); r != nil {
				r.Dir = b.str(d.Dir)
				b.partitions(r, t.Partitions)
			}
		}
	}
}
