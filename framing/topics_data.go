package framing

import "github.com/twmb/franz-go/pkg/kmsg"

// data reports the topics of the APIs clients use to produce, consume,
// commit and join groups; false when req is none of them.
func (w walk) data(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, t.TopicID, t.Partitions, func(p *kmsg.ProduceRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	case *kmsg.FetchRequest:
		w.fetch(r)
	case *kmsg.ListOffsetsRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, [16]byte{}, t.Partitions, func(p *kmsg.ListOffsetsRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	case *kmsg.MetadataRequest:
		for _, t := range r.Topics {
			if !w.nullable(t.Topic, t.TopicID) {
				break
			}
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, [16]byte{}, t.Partitions, func(p *kmsg.OffsetForLeaderEpochRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	case *kmsg.DescribeProducersRequest:
		for _, t := range r.Topics {
			if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
				break
			}
		}
	default:
		return w.groups(req) || w.share(req) || w.streams(req)
	}
	return true
}

// fetch reports the topics a Fetch reads and those it drops from its
// session.
func (w walk) fetch(r *kmsg.FetchRequest) {
	for _, t := range r.Topics {
		if !partitions(w, t.Topic, t.TopicID, t.Partitions, func(p *kmsg.FetchRequestTopicPartition) int32 { return p.Partition }) {
			return
		}
	}
	for _, t := range r.ForgottenTopics {
		if !w.numbers(t.Topic, t.TopicID, t.Partitions) {
			return
		}
	}
}

// groups reports the topics of offset commits and fetches, transactions
// and consumer group heartbeats.
func (w walk) groups(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, t.TopicID, t.Partitions, func(p *kmsg.OffsetCommitRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	case *kmsg.OffsetFetchRequest:
		w.offsetFetch(r)
	case *kmsg.OffsetDeleteRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, [16]byte{}, t.Partitions, func(p *kmsg.OffsetDeleteRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	case *kmsg.TxnOffsetCommitRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, t.TopicID, t.Partitions, func(p *kmsg.TxnOffsetCommitRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	case *kmsg.AddPartitionsToTxnRequest:
		w.addPartitionsToTxn(r)
	case *kmsg.WriteTxnMarkersRequest:
		w.writeTxnMarkers(r)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if !w.names(r.SubscribedTopicNames) {
			break
		}
		for _, t := range r.Topics {
			if !w.numbers("", t.TopicID, t.Partitions) {
				break
			}
		}
	default:
		return false
	}
	return true
}

// offsetFetch reports the topics of OffsetFetch: top level up to v7,
// per group from v8 (by id from v10).
func (w walk) offsetFetch(r *kmsg.OffsetFetchRequest) {
	for _, t := range r.Topics {
		if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
			return
		}
	}
	for _, g := range r.Groups {
		for _, t := range g.Topics {
			if !w.numbers(t.Topic, t.TopicID, t.Partitions) {
				return
			}
		}
	}
}

// addPartitionsToTxn reports the topics of AddPartitionsToTxn: top level
// up to v3, per transaction from v4.
func (w walk) addPartitionsToTxn(r *kmsg.AddPartitionsToTxnRequest) {
	for _, t := range r.Topics {
		if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
			return
		}
	}
	for _, tx := range r.Transactions {
		for _, t := range tx.Topics {
			if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
				return
			}
		}
	}
}

func (w walk) writeTxnMarkers(r *kmsg.WriteTxnMarkersRequest) {
	for _, m := range r.Markers {
		for _, t := range m.Topics {
			if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
				return
			}
		}
	}
}

// share reports the topics of share groups (KIP-932), named by id when
// read.
func (w walk) share(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.ShareGroupHeartbeatRequest:
		w.names(r.SubscribedTopicNames)
	case *kmsg.ShareFetchRequest:
		for _, t := range r.Topics {
			if !partitions(w, "", t.TopicID, t.Partitions, func(p *kmsg.ShareFetchRequestTopicPartition) int32 { return p.Partition }) {
				return true
			}
		}
		for _, t := range r.ForgottenTopicsData {
			if !w.numbers("", t.TopicID, t.Partitions) {
				return true
			}
		}
	case *kmsg.ShareAcknowledgeRequest:
		for _, t := range r.Topics {
			if !partitions(w, "", t.TopicID, t.Partitions, func(p *kmsg.ShareAcknowledgeRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	case *kmsg.DescribeShareGroupOffsetsRequest:
		for _, g := range r.Groups {
			for _, t := range g.Topics {
				if !w.numbers(t.Topic, [16]byte{}, t.Partitions) {
					return true
				}
			}
		}
	case *kmsg.AlterShareGroupOffsetsRequest:
		for _, t := range r.Topics {
			if !partitions(w, t.Topic, [16]byte{}, t.Partitions, func(p *kmsg.AlterShareGroupOffsetsRequestTopicPartition) int32 { return p.Partition }) {
				break
			}
		}
	case *kmsg.DeleteShareGroupOffsetsRequest:
		for _, t := range r.Topics {
			if !w.topic(t.Topic, [16]byte{}) {
				break
			}
		}
	default:
		return false
	}
	return true
}

// streams reports the topics a Kafka Streams application declares in its
// topology (KIP-1071).
func (w walk) streams(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.StreamsGroupHeartbeatRequest:
		if r.Topology == nil {
			return true
		}
		for _, s := range r.Topology.Subtopologies {
			if !w.names(s.SourceTopics) || !w.names(s.RepartitionSinkTopics) ||
				!w.infos(s.StateChangelogTopics) || !w.infos(s.RepartitionSourceTopics) {
				return true
			}
		}
	case *kmsg.StreamsGroupTopologyDescriptionUpdateRequest:
		d := r.TopologyDescription
		for _, s := range d.Subtopologies {
			for i := range s.Nodes {
				if !w.node(&s.Nodes[i]) {
					return true
				}
			}
		}
		for i := range d.GlobalStores {
			if !w.node(&d.GlobalStores[i].Source) || !w.node(&d.GlobalStores[i].Processor) {
				return true
			}
		}
	default:
		return false
	}
	return true
}

func (w walk) infos(list []kmsg.TopicInfo) bool {
	for _, t := range list {
		if !w.fn(t.Topic, NoPartition) {
			return false
		}
	}
	return true
}

func (w walk) node(n *kmsg.TopologyDescriptionNode) bool {
	if !w.names(n.SourceTopics) {
		return false
	}
	return n.SinkTopic == nil || w.fn(*n.SinkTopic, NoPartition)
}
