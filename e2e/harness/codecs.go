package harness

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Codecs reads the first batches of each partition of topic raw, on the
// DIRECT listener, and counts them by compression codec as written in the
// log (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd): a client that silently
// fell back to no compression cannot pass a compression scenario.
func (k *Kafka) Codecs(t testing.TB, topic string) map[int8]int {
	t.Helper()
	return codecs(t, []string{k.Direct}, topic)
}

// codecs is Codecs through seeds: one raw Fetch to each partition
// leader, with a client closed before it returns.
func codecs(t testing.TB, seeds []string, topic string) map[int8]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	// A raw Fetch goes to whichever broker the client picks, so ask each
	// leader for its own partitions.
	byLeader := map[int32][]int32{}
	for _, p := range mresp.Topics[0].Partitions {
		byLeader[p.Leader] = append(byLeader[p.Leader], p.Partition)
	}
	codecs := map[int8]int{}
	for leader, parts := range byLeader {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		// franz-go sends the newest version both sides know, which names
		// topics by id from Fetch v13 on, by name before.
		ft.Topic = topic
		ft.TopicID = mresp.Topics[0].TopicID
		for _, p := range parts {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition = p
			fp.PartitionMaxBytes = 64 << 10
			ft.Partitions = append(ft.Partitions, fp)
		}
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			t.Fatalf("raw fetch of %s from node %d: %v", topic, leader, err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					t.Fatalf("raw fetch of %s[%d] from node %d: %v", topic, rp.Partition, leader, err)
				}
				countCodecs(t, topic, rp.RecordBatches, codecs)
			}
		}
	}
	return codecs
}

// countCodecs adds the codec of each whole data batch in b to codecs.
func countCodecs(t testing.TB, topic string, b []byte, codecs map[int8]int) {
	t.Helper()
	for len(b) >= 61 { // a record batch header
		var batch kmsg.RecordBatch
		n := int(int32(binary.BigEndian.Uint32(b[8:]))) + 12 // batch length after offset and length
		if n > len(b) {                                      // a partial batch at the end of the response
			break
		}
		if err := batch.ReadFrom(b[:n]); err != nil {
			t.Fatalf("raw fetch of %s: a batch that does not parse: %v", topic, err)
		}
		if batch.Attributes&0x20 == 0 { // not a control batch
			codecs[int8(batch.Attributes&7)]++
		}
		b = b[n:]
	}
}
