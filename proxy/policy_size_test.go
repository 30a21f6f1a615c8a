package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/policy"
)

// A producer over a per-partition batch limit gets MESSAGE_TOO_LARGE for
// that partition while the other partitions of the same request are
// written: kproxy forwards the rest and adds the refusal to the broker's
// answer.
func TestPolicyBatchSizePerPartition(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(2, "sized")})
	env.srv.SetPolicies(policy.New(policy.Config{Rules: []policy.Rule{{
		Name:   "small-batches",
		Match:  policy.Selector{APIs: []string{"Produce"}},
		Limits: policy.Limits{MaxBatchBytes: 4096},
		Action: policy.ActionReject,
	}}}, policy.NewMetrics(prometheus.NewRegistry())))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(50*time.Millisecond),
		kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	big := &kgo.Record{Topic: "sized", Partition: 0, Value: []byte(strings.Repeat("x", 8000))}
	small := &kgo.Record{Topic: "sized", Partition: 1, Value: []byte("fits")}
	results := cl.ProduceSync(ctx, big, small)
	var bigErr, smallErr error
	for _, r := range results {
		if r.Record == big {
			bigErr = r.Err
		} else {
			smallErr = r.Err
		}
	}
	if !errors.Is(bigErr, kerr.MessageTooLarge) {
		t.Fatalf("oversize partition: %v, want MESSAGE_TOO_LARGE", bigErr)
	}
	if smallErr != nil {
		t.Fatalf("partition within the limit failed: %v", smallErr)
	}
	if env.requests("Produce") != 1 {
		t.Logf("the two records went in %v produce requests", env.requests("Produce"))
	}
	// The small record really reached the broker.
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"sized": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fs := cons.PollFetches(ctx)
	var got []string
	fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	if len(got) != 1 || got[0] != "fits" {
		t.Fatalf("broker holds %q, want only the small record", got)
	}
}
