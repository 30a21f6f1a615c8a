package framing

import "github.com/twmb/franz-go/pkg/kmsg"

// NoPartition is passed to EachTopic's fn for a topic named without
// partitions.
const NoPartition int32 = -1

// UnknownTopic is the name EachTopic gives a topic it cannot name: one
// named by an id kproxy has not learnt from a Metadata response, named in
// a request kproxy does not open (see BrokerOnly), or covered by a request
// about many topics at once (an ACL filter or pattern, a null ElectLeaders
// list). Kafka topic names are never empty, so it stands for no real
// topic; a rule that selects topics must take it as possibly any of them
// (fail closed).
const UnknownTopic = ""

// EachTopic calls fn with every topic (and partition) a request names, in
// order, resolving topic ids through ids, until fn returns false. Every
// request type that can name a topic is covered, by name or by id, nested
// lists included (TestEachTopicCoversEveryRequest walks kmsg to keep it
// so); topics kproxy cannot name come as UnknownTopic. A request for "all
// topics" that only reads (Metadata with a null list, say) names none; one
// that changes them (ElectLeaders with a null list, an ACL on "*" or on a
// prefix) names UnknownTopic. Regular expressions (subscriptions by
// pattern) are not topics: the topics they come to are named by id in the
// requests that read them.
//
// Names alias the request's frame: clone any that outlive it. Requests of
// APIs that name no topics give no calls.
func EachTopic(req kmsg.Request, ids *TopicIDs, fn func(topic string, partition int32) bool) {
	w := walk{ids: ids, fn: fn}
	if BrokerOnly(req.Key()) {
		fn(UnknownTopic, NoPartition)
		return
	}
	if !w.data(req) {
		w.admin(req)
	}
}

// NamesTopics reports whether requests of key can name topics, so that a
// rule selecting topics knows that a body it cannot read might. A key
// kproxy does not know (a broker newer than its kmsg may serve it) might
// name any: it does, so that topic rules fail closed on it.
func NamesTopics(key int16) bool {
	if key < 0 || int(key) >= len(topicKeys) || !apis[key].known {
		return true
	}
	return topicKeys[key]
}

// topicKeys are the API keys whose requests can name topics; the test
// that walks kmsg keeps it in step with EachTopic.
var topicKeys = func() (k [MaxKey + 1]bool) {
	for _, key := range []kmsg.Key{
		kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata,
		kmsg.LeaderAndISR, kmsg.StopReplica, kmsg.UpdateMetadata,
		kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.CreateTopics, kmsg.DeleteTopics,
		kmsg.DeleteRecords, kmsg.OffsetForLeaderEpoch, kmsg.AddPartitionsToTxn,
		kmsg.WriteTxnMarkers, kmsg.TxnOffsetCommit,
		kmsg.DescribeACLs, kmsg.CreateACLs, kmsg.DeleteACLs,
		kmsg.DescribeConfigs, kmsg.AlterConfigs, kmsg.AlterReplicaLogDirs, kmsg.DescribeLogDirs,
		kmsg.CreatePartitions, kmsg.ElectLeaders, kmsg.IncrementalAlterConfigs,
		kmsg.AlterPartitionAssignments, kmsg.ListPartitionReassignments, kmsg.OffsetDelete,
		kmsg.Vote, kmsg.BeginQuorumEpoch, kmsg.EndQuorumEpoch, kmsg.DescribeQuorum,
		kmsg.AlterPartition, kmsg.Envelope, kmsg.FetchSnapshot, kmsg.DescribeProducers,
		kmsg.ConsumerGroupHeartbeat, kmsg.AssignReplicasToDirs, kmsg.DescribeTopicPartitions,
		kmsg.ShareGroupHeartbeat, kmsg.ShareFetch, kmsg.ShareAcknowledge,
		kmsg.InitializeShareGroupState, kmsg.ReadShareGroupState, kmsg.WriteShareGroupState,
		kmsg.DeleteShareGroupState, kmsg.ReadShareGroupStateSummary,
		kmsg.StreamsGroupHeartbeat, kmsg.DescribeShareGroupOffsets, kmsg.AlterShareGroupOffsets,
		kmsg.DeleteShareGroupOffsets, kmsg.StreamsGroupTopologyDescriptionUpdate,
	} {
		k[key] = true
	}
	return k
}()

// BrokerOnly reports the APIs that only brokers and controllers send each
// other (replication, KRaft quorum, share-group state, Envelope, which
// carries a whole other request). A client behind kproxy has no business
// sending them, so kproxy does not read their topics: they name
// UnknownTopic, and every rule that selects topics selects them.
func BrokerOnly(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.LeaderAndISR, kmsg.StopReplica, kmsg.UpdateMetadata,
		kmsg.Vote, kmsg.BeginQuorumEpoch, kmsg.EndQuorumEpoch, kmsg.FetchSnapshot,
		kmsg.AlterPartition, kmsg.Envelope, kmsg.AssignReplicasToDirs,
		kmsg.InitializeShareGroupState, kmsg.ReadShareGroupState, kmsg.WriteShareGroupState,
		kmsg.DeleteShareGroupState, kmsg.ReadShareGroupStateSummary:
		return true
	}
	return false
}

// walk reports the topics of one request to fn; each method returns false
// once fn has asked to stop.
type walk struct {
	ids *TopicIDs
	fn  func(topic string, partition int32) bool
}

// name is topic, or the name learnt for id when the request names the
// topic by id only: UnknownTopic when the id was never learnt.
func (w walk) name(topic string, id [16]byte) string {
	if topic == "" {
		return w.ids.Name(id)
	}
	return topic
}

// topic reports a topic named without partitions.
func (w walk) topic(topic string, id [16]byte) bool { return w.fn(w.name(topic, id), NoPartition) }

// nullable reports a topic whose name may be null (then named by id).
func (w walk) nullable(topic *string, id [16]byte) bool {
	name := ""
	if topic != nil {
		name = *topic
	}
	return w.topic(name, id)
}

// names reports a list of bare topic names.
func (w walk) names(list []string) bool {
	for _, t := range list {
		if !w.fn(t, NoPartition) {
			return false
		}
	}
	return true
}

// numbers reports a topic with its partitions given as bare numbers; an
// empty list names the topic alone.
func (w walk) numbers(topic string, id [16]byte, ps []int32) bool {
	name := w.name(topic, id)
	if len(ps) == 0 {
		return w.fn(name, NoPartition)
	}
	for _, p := range ps {
		if !w.fn(name, p) {
			return false
		}
	}
	return true
}

// partitions reports a topic with its partitions given as structs, index
// picking each one's number; an empty list names the topic alone.
func partitions[P any](w walk, topic string, id [16]byte, ps []P, index func(*P) int32) bool {
	name := w.name(topic, id)
	if len(ps) == 0 {
		return w.fn(name, NoPartition)
	}
	for i := range ps {
		if !w.fn(name, index(&ps[i])) {
			return false
		}
	}
	return true
}
