package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterFranzGo: a franz-go client bootstraps through a cluster-mode
// kproxy in front of three kfake brokers, produces to partitions led by
// every broker and consumes them all back in a group, dialling nothing
// but kproxy's listeners.
func TestClusterFranzGo(t *testing.T) {
	env := startCluster(t, 3, 7, []kfake.Opt{kfake.SeedTopics(6, "spread")})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dials := &dialLog{}
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials), kgo.DefaultProduceTopic("spread"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 600
	for i := 0; i < n; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: keyOf(i), Value: valueOf(i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials), kgo.ConsumerGroup("spread-group"),
		kgo.ConsumeTopics("spread"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[string]bool{}
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		want[string(keyOf(i))+"="+string(valueOf(i))] = true
	}
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(got), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Key)+"="+string(r.Value)] = true
		})
	}
	for k := range got {
		if !want[k] {
			t.Fatalf("consumed a record never produced: %q", k)
		}
	}
	if distinct := dials.check(t, env); distinct < 4 {
		t.Fatalf("dialled %d kproxy listeners, want the bootstrap and all three node ports", distinct)
	}
}
