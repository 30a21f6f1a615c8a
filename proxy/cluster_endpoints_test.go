package proxy

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kfake's highest Produce and Fetch versions (its regKey): the tests go up
// to the lower of these and kmsg's.
const kfakeMaxProduce, kfakeMaxFetch = 13, 18

// endpointsWorld is a cluster-mode kproxy in front of three kfake brokers
// with a two-partition topic: partition 0 led by node 0 and holding
// records, partition 1 moved from node 0 to node 1, so that node 0
// answers for partition 1 with NOT_LEADER_OR_FOLLOWER and the KIP-951
// NodeEndpoints of every broker, which kfake fills with its own
// addresses.
type endpointsWorld struct {
	*clusterEnv
	topic   string
	topicID [16]byte
	direct  net.Conn // to node 0 itself, bypassing kproxy
	proxied net.Conn // to kproxy's port for node 0
}

func startEndpointsWorld(t *testing.T) *endpointsWorld {
	t.Helper()
	const topic = "endpoints"
	env := startCluster(t, 3, 7, []kfake.Opt{kfake.SeedTopics(2, topic)})
	for p := int32(0); p < 2; p++ {
		if err := env.kc.MoveTopicPartition(topic, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var recs []*kgo.Record
	for i := 0; i < 20; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Key: keyOf(i), Value: valueOf(i)})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	w := &endpointsWorld{clusterEnv: env, topic: topic, topicID: env.kc.TopicInfo(topic).TopicID}
	w.direct = dialRaw(t, env.realAddr(t, 0))
	w.proxied = dialRaw(t, env.nodeAddr(0))
	return w
}

// both sends req to node 0 directly and through kproxy, with the same
// correlation id, and returns the two response frames.
func (w *endpointsWorld) both(t *testing.T, req kmsg.Request, corr int32) (direct, proxied []byte) {
	t.Helper()
	direct, _ = clusterRoundTrip(t, w.direct, req, corr)
	proxied, _ = clusterRoundTrip(t, w.proxied, req, corr)
	return direct, proxied
}

// rewritten is what a client must receive for the broker's frame: the
// same response with every NodeEndpoints entry at its node port, the rest
// (records included) byte for byte. It fails unless the broker's frame
// named all three brokers at their real addresses.
func (w *endpointsWorld) rewritten(t *testing.T, frame []byte, key, version int16) []byte {
	t.Helper()
	resp := decodeResponse(t, frame, key, version)
	if !bytes.Equal(responseFrame(resp, corrOf(frame)), frame) {
		t.Fatalf("%s v%d: kmsg does not re-encode kfake's frame as it was; the byte comparison would mean nothing", kmsg.NameForKey(key), version)
	}
	check := func(node int32, host *string, port *int32) {
		if got := hostPort(*host, *port); got != w.realAddr(t, node) {
			t.Fatalf("%s v%d from kfake names node %d at %s, not its real address %s", kmsg.NameForKey(key), version, node, got, w.realAddr(t, node))
		}
		h, p, _ := net.SplitHostPort(w.nodeAddr(node))
		port32, _ := strconv.Atoi(p)
		*host, *port = h, int32(port32)
	}
	n := 0
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Brokers {
			check(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
		n = len(r.Brokers)
	case *kmsg.FetchResponse:
		for i := range r.Brokers {
			check(r.Brokers[i].NodeID, &r.Brokers[i].Host, &r.Brokers[i].Port)
		}
		n = len(r.Brokers)
	case *kmsg.ShareFetchResponse:
		for i := range r.NodeEndpoints {
			check(r.NodeEndpoints[i].NodeID, &r.NodeEndpoints[i].Host, &r.NodeEndpoints[i].Port)
		}
		n = len(r.NodeEndpoints)
	}
	if n != 3 {
		t.Fatalf("%s v%d from kfake has %d NodeEndpoints, want 3: the test does not exercise the rewrite", kmsg.NameForKey(key), version, n)
	}
	return responseFrame(resp, corrOf(frame))
}

// TestClusterProduceNodeEndpoints: a Produce v10+ for a partition that
// moved away is answered by its old leader with NOT_LEADER_OR_FOLLOWER,
// the new leader and the NodeEndpoints of every broker. The client
// receives exactly the broker's frame with each endpoint at its node port.
func TestClusterProduceNodeEndpoints(t *testing.T) {
	w := startEndpointsWorld(t)
	if err := w.kc.MoveTopicPartition(w.topic, 1, 1); err != nil {
		t.Fatal(err)
	}
	top := min(kfakeMaxProduce, kmsg.NewPtrProduceRequest().MaxVersion())
	for v := int16(10); v <= top; v++ {
		req := produceRequest(v, -1, w.topic)
		req.Topics[0].TopicID = w.topicID
		req.Topics[0].Partitions[0].Partition = 1
		direct, proxied := w.both(t, req, int32(v))
		if want := w.rewritten(t, direct, 0, v); !bytes.Equal(proxied, want) {
			t.Fatalf("Produce v%d: the client got\n%x\nwant the broker's frame with node ports\n%x", v, proxied, want)
		}
		r := decodeResponse(t, proxied, 0, v).(*kmsg.ProduceResponse)
		p := r.Topics[0].Partitions[0]
		if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != 1 {
			t.Fatalf("Produce v%d: partition 1 answered %v, leader %d; want NOT_LEADER_OR_FOLLOWER, leader 1",
				v, kerr.ErrorForCode(p.ErrorCode), p.CurrentLeader.LeaderID)
		}
		for _, b := range r.Brokers {
			if got := hostPort(b.Host, b.Port); got != w.nodeAddr(b.NodeID) {
				t.Fatalf("Produce v%d: the client was told node %d is at %s, not %s", v, b.NodeID, got, w.nodeAddr(b.NodeID))
			}
		}
	}
}

// fetchBoth is a Fetch without a session of partitions 0 and 1 from
// offset 0, not waiting for more records than there are.
func (w *endpointsWorld) fetchBoth(v int16) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes = v, 100, 1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = w.topic, w.topicID
	for p := int32(0); p < 2; p++ {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, 0, 1<<20
		t.Partitions = append(t.Partitions, fp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

// TestClusterFetchNodeEndpoints: a Fetch v16+ that returns records of one
// partition and NOT_LEADER_OR_FOLLOWER with NodeEndpoints for another
// reaches the client as the broker sent it, records byte for byte, with
// each endpoint at its node port; the same Fetch before the move, with no
// NodeEndpoints, reaches the client unchanged.
func TestClusterFetchNodeEndpoints(t *testing.T) {
	w := startEndpointsWorld(t)
	top := min(kfakeMaxFetch, kmsg.NewPtrFetchRequest().MaxVersion())
	for v := int16(16); v <= top; v++ {
		direct, proxied := w.both(t, w.fetchBoth(v), int32(v))
		if !bytes.Equal(direct, proxied) {
			t.Fatalf("Fetch v%d without NodeEndpoints: the client got\n%x\nnot the broker's frame\n%x", v, proxied, direct)
		}
	}
	if err := w.kc.MoveTopicPartition(w.topic, 1, 1); err != nil {
		t.Fatal(err)
	}
	for v := int16(16); v <= top; v++ {
		direct, proxied := w.both(t, w.fetchBoth(v), 100+int32(v))
		if want := w.rewritten(t, direct, 1, v); !bytes.Equal(proxied, want) {
			t.Fatalf("Fetch v%d: the client got\n%x\nwant the broker's frame with node ports\n%x", v, proxied, want)
		}
		r := decodeResponse(t, proxied, 1, v).(*kmsg.FetchResponse)
		ps := r.Topics[0].Partitions
		if len(ps) != 2 {
			t.Fatalf("Fetch v%d: %d partitions answered, want 2", v, len(ps))
		}
		for _, p := range ps {
			switch p.Partition {
			case 0:
				if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
					t.Fatalf("Fetch v%d: partition 0 answered %v with %d bytes of records", v, kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
				}
				checkRecords(t, p.RecordBatches, 20)
			case 1:
				if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != 1 {
					t.Fatalf("Fetch v%d: partition 1 answered %v, leader %d", v, kerr.ErrorForCode(p.ErrorCode), p.CurrentLeader.LeaderID)
				}
			}
		}
		for _, b := range r.Brokers {
			if got := hostPort(b.Host, b.Port); got != w.nodeAddr(b.NodeID) {
				t.Fatalf("Fetch v%d: the client was told node %d is at %s, not %s", v, b.NodeID, got, w.nodeAddr(b.NodeID))
			}
		}
	}
}

// checkRecords fails unless batches hold records 0..n-1 as produced.
func checkRecords(t *testing.T, batches []byte, n int) {
	t.Helper()
	got := 0
	for len(batches) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(batches); err != nil {
			t.Fatalf("record batch: %v", err)
		}
		batches = batches[12+int(b.Length):]
		if b.Attributes&0x7 != 0 {
			t.Fatalf("record batch compressed (attributes %#x); the producer was told not to", b.Attributes)
		}
		recs := b.Records
		for i := 0; i < int(b.NumRecords); i++ {
			var r kmsg.Record
			if err := r.ReadFrom(recs); err != nil {
				t.Fatalf("record %d: %v", got, err)
			}
			recs = recs[len(r.AppendTo(nil)):]
			if !bytes.Equal(r.Key, keyOf(got)) || !bytes.Equal(r.Value, valueOf(got)) {
				t.Fatalf("record %d is %q=%q", got, r.Key, r.Value)
			}
			got++
		}
	}
	if got != n {
		t.Fatalf("fetched %d records, want %d", got, n)
	}
}

// TestClusterShareFetchNodeEndpoints: a ShareFetch (KIP-932) for a
// partition that moved away is answered with NOT_LEADER_OR_FOLLOWER and
// the NodeEndpoints of every broker (not a tagged field here); the client
// receives the broker's answer with each endpoint at its node port.
func TestClusterShareFetchNodeEndpoints(t *testing.T) {
	w := startEndpointsWorld(t)
	if err := w.kc.MoveTopicPartition(w.topic, 1, 1); err != nil {
		t.Fatal(err)
	}
	group, member := "share-group", "share-member-0000000001"
	top := min(2, kmsg.NewPtrShareFetchRequest().MaxVersion()) // kfake: ShareFetch v0-2
	for v := int16(1); v <= top; v++ {
		req := kmsg.NewPtrShareFetchRequest()
		req.Version, req.GroupID, req.MemberID = v, &group, &member
		req.ShareSessionEpoch, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = 0, 100, 1, 1<<20, 100
		st := kmsg.NewShareFetchRequestTopic()
		st.TopicID = w.topicID
		sp := kmsg.NewShareFetchRequestTopicPartition()
		sp.Partition = 1
		st.Partitions = append(st.Partitions, sp)
		req.Topics = append(req.Topics, st)
		direct, proxied := w.both(t, req, 200+int32(v))
		if want := w.rewritten(t, direct, 78, v); !bytes.Equal(proxied, want) {
			t.Fatalf("ShareFetch v%d: the client got\n%x\nwant the broker's frame with node ports\n%x", v, proxied, want)
		}
		r := decodeResponse(t, proxied, 78, v).(*kmsg.ShareFetchResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 || r.Topics[0].Partitions[0].ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("ShareFetch v%d: answered %+v, want NOT_LEADER_OR_FOLLOWER for partition 1", v, r.Topics)
		}
		for _, b := range r.NodeEndpoints {
			if got := hostPort(b.Host, b.Port); got != w.nodeAddr(b.NodeID) {
				t.Fatalf("ShareFetch v%d: the client was told node %d is at %s, not %s", v, b.NodeID, got, w.nodeAddr(b.NodeID))
			}
		}
	}
}
