package harness

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Racks: every node of a KafkaCluster is in a rack of its own, and the
// brokers pick a follower in the consumer's rack when it fetches with a
// rack id (KIP-392). A client that sends no rack id fetches from the
// leader, as on a cluster without racks.

// Rack is the broker.rack of node id.
func Rack(id int32) string { return fmt.Sprintf("rack-%d", id) }

// rackSelector is the replica selector that serves a consumer from a
// replica in its own rack.
const rackSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// CreateTopicOn creates topic with one partition on replicas, the first
// its preferred leader, and waits until that node leads it with every
// replica in sync: only then may a fetch be sent to any of them.
func (c *KafkaCluster) CreateTopicOn(t testing.TB, topic string, replicas []int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode != 0 {
		err = fmt.Errorf("error code %d", resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("creating topic %s on %v: %v", topic, replicas, err)
	}
	adm := kadm.NewClient(cl)
	for {
		m, err := adm.Metadata(ctx, topic)
		if err == nil {
			if p, ok := m.Topics[topic].Partitions[0]; ok && p.Err == nil && p.Leader == replicas[0] && len(p.ISR) == len(replicas) {
				offs, err := adm.ListEndOffsets(ctx, topic)
				if err == nil && offs[topic][0].Err == nil {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s: not led by node %d with replicas %v in sync within 60s (%v)", topic, replicas[0], slices.Clone(replicas), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
