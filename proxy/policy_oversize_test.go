package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

func maxRequestRule(limit int) *policy.Engine {
	return policy.New(policy.Config{Rules: []policy.Rule{{
		Name: "max-1mib", Match: policy.Selector{APIs: []string{"Produce"}},
		Limits: policy.Limits{MaxRequestBytes: limit}, Action: policy.ActionReject,
	}}}, policy.NewMetrics(prometheus.NewRegistry()))
}

// A produce over a rule's max_request_bytes is answered with
// MESSAGE_TOO_LARGE without reaching the broker, and the same client and
// connection go on producing.
func TestPolicyOversizeProduceAnswered(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "big")})
	env.srv.SetPolicies(maxRequestRule(1 << 20))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.ProducerBatchMaxBytes(8<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: []byte("small")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	accepted := env.accepted()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: []byte(strings.Repeat("x", 4<<20))}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("4 MiB produce: %v, want MESSAGE_TOO_LARGE", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the refusal: %v", err)
	}
	if n := testutil.ToFloat64(env.m.Relay.OversizeAnswered); n != 1 {
		t.Fatalf("oversize answered = %v, want 1", n)
	}
	if env.accepted() != accepted {
		t.Fatal("the client had to reconnect after the refusal")
	}
}

// The refused body is dropped as it arrives: kproxy answers only once the
// last byte is in, and the answer names every partition the request did.
func TestPolicyOversizeBodyStreamed(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(2, "big")})
	env.srv.SetPolicies(maxRequestRule(64 << 10))
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, -1, 1000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "big"
	for p := int32(0); p < 2; p++ {
		part := kmsg.NewProduceRequestTopicPartition()
		part.Partition, part.Records = p, make([]byte, 1<<20)
		topic.Partitions = append(topic.Partitions, part)
	}
	req.Topics = append(req.Topics, topic)
	frame := encodeRequest(req, 77)
	c := dialRaw(t, env.addr)
	half := len(frame) / 2
	c.Write(frame[:half])
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if f, err := readFrame(c); err == nil {
		t.Fatalf("answered (id %d) before the body was in", corrOf(f))
	}
	c.Write(frame[half:])
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := readFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := framing.DecodeResponse(f, 0, 7)
	if err != nil || corrOf(f) != 77 {
		t.Fatalf("answer: %v, id %d", err, corrOf(f))
	}
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 2 {
		t.Fatalf("answer names %+v, want both partitions of big", pr.Topics)
	}
	for _, p := range pr.Topics[0].Partitions {
		if p.ErrorCode != 10 {
			t.Fatalf("partition %d: error %d, want MESSAGE_TOO_LARGE", p.Partition, p.ErrorCode)
		}
	}
	// Still in frame: the next request on the same connection is answered.
	c.Write(apiVersionsV0(78))
	if f, err := readFrame(c); err != nil || corrOf(f) != 78 {
		t.Fatalf("request after the refused one: %v", err)
	}
}
