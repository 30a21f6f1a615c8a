package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/batchtest"
	"github.com/kproxy/kproxy/policy"
)

// producerStandards is the producer rule on orders.* topics.
func producerStandards(action string) policy.Rule {
	return policy.Rule{Name: "producer-standards", Action: action,
		Match: policy.Selector{APIs: []string{"Produce"}, Topics: []string{"orders.*"}},
		Require: &policy.Require{Acks: "all", Idempotent: true, Compression: []string{"lz4", "zstd"},
			RecordKey: true, MaxRecordBytes: 4096, Headers: []string{"traceparent"}}}
}

// okValue compresses well, so franz-go's producer keeps its lz4 batch (it
// sends a batch uncompressed when compressing does not shrink it).
var okValue = []byte(strings.Repeat("governance ", 100))

var goodHeaders = []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}}

// franzProduce produces one record with a fresh client built from opts,
// and returns the produce error.
func franzProduce(t *testing.T, env *testEnv, r *kgo.Record, opts ...kgo.Opt) error {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(env.addr), kgo.RecordRetries(1), kgo.ProducerBatchMaxBytes(8 << 20),
		kgo.ProducerBatchCompression(kgo.Lz4Compression())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, r).FirstErr()
}

// Every producer condition with franz-go: refused with the broker's code
// for it, and the same record within the rule produced.
func TestGovernanceProduceFranz(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "orders.eu", "audit")})
	ps := applyPolicies(t, env, producerStandards(policy.ActionReject))
	rec := func(key string, value []byte, h []kgo.RecordHeader) *kgo.Record {
		r := &kgo.Record{Topic: "orders.eu", Value: value, Headers: h}
		if key != "" {
			r.Key = []byte(key)
		}
		return r
	}
	cases := []struct {
		name string
		r    *kgo.Record
		opts []kgo.Opt
		code error
	}{
		{"acks=1", rec("k", okValue, goodHeaders), []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}, kerr.InvalidRequiredAcks},
		{"not idempotent", rec("k", okValue, goodHeaders), []kgo.Opt{kgo.DisableIdempotentWrite()}, kerr.InvalidRecord},
		{"gzip", rec("k", okValue, goodHeaders), []kgo.Opt{kgo.ProducerBatchCompression(kgo.GzipCompression())}, kerr.UnsupportedCompressionType},
		{"uncompressed", rec("k", okValue, goodHeaders), []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression())}, kerr.UnsupportedCompressionType},
		{"null key", rec("", okValue, goodHeaders), nil, kerr.InvalidRecord},
		{"big record", rec("k", make([]byte, 8000), goodHeaders), nil, kerr.InvalidRecord},
		{"no traceparent", rec("k", okValue, nil), nil, kerr.InvalidRecord},
		// A 2 MiB record (lz4 shrinks it to almost nothing) is read and
		// judged: over max_record_bytes.
		{"inflated big record", rec("k", make([]byte, 2<<20), goodHeaders), nil, kerr.InvalidRecord},
	}
	for _, c := range cases {
		if err := franzProduce(t, env, c.r, c.opts...); !errors.Is(err, c.code) {
			t.Errorf("%s: produce error %v, want %v", c.name, err, c.code)
		}
	}
	if err := franzProduce(t, env, rec("k", okValue, goodHeaders)); err != nil {
		t.Fatalf("a record within the rule: %v", err)
	}
	// Topics the rule does not select are not judged.
	if err := franzProduce(t, env, &kgo.Record{Topic: "audit", Value: []byte("v")}, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()); err != nil {
		t.Fatalf("acks=1 to a topic outside the rule: %v", err)
	}
	if got := consumeAll(t, env, "orders.eu"); got != 1 {
		t.Errorf("orders.eu holds %d records, want the 1 within the rule", got)
	}
	for cond, want := range map[string]float64{"acks": 1, "idempotent": 1, "compression": 2, "record_key": 1, "max_record_bytes": 2, "headers": 1} {
		if got := violations(t, ps, "producer-standards", cond); got < want {
			t.Errorf("violations{%s} = %v, want at least %v", cond, got, want)
		}
	}
}

// Record errors name the records (Produce v8+), and only the offending
// partitions of a request are refused: the rest are written.
func TestGovernanceProducePartial(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(2, "orders.us")})
	applyPolicies(t, env, policy.Rule{Name: "keys", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"Produce"}}, Require: &policy.Require{RecordKey: true}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// One produce: partition 0's batch has a keyless record, partition 1's
	// is fine. A raw request shows what a client sees.
	conn := dialRaw(t, env.addr)
	defer conn.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "orders.us"
	for p, keys := range [][]string{{"a", "", "c"}, {"x"}} {
		part := kmsg.NewProduceRequestTopicPartition()
		part.Partition = int32(p)
		part.Records = batchOf(keys)
		topic.Partitions = append(topic.Partitions, part)
	}
	req.Topics = append(req.Topics, topic)
	resp := ask(t, conn, req, 7).(*kmsg.ProduceResponse)
	codes := map[int32]kmsg.ProduceResponseTopicPartition{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[rp.Partition] = rp
		}
	}
	p0, p1 := codes[0], codes[1]
	if p0.ErrorCode != kerr.InvalidRecord.Code || len(p0.ErrorRecords) != 1 || p0.ErrorRecords[0].RelativeOffset != 1 ||
		p0.ErrorRecords[0].ErrorMessage == nil || *p0.ErrorRecords[0].ErrorMessage != "rule keys: record_key: record 1 has a null key" {
		t.Errorf("partition 0: %+v, want INVALID_RECORD naming record 1", p0)
	}
	if p1.ErrorCode != 0 {
		t.Errorf("partition 1: code %d, want written", p1.ErrorCode)
	}
	// The broker has partition 1's record and nothing of partition 0.
	fetches := endOffsets(t, cl, ctx, "orders.us")
	if fetches[1] != 1 || fetches[0] != 0 {
		t.Errorf("records per partition %v, want only partition 1's", fetches)
	}
}

// batchOf is an uncompressed batch of value-only records with these keys
// ("" for a null key).
func batchOf(keys []string) []byte {
	recs := make([]kmsg.Record, len(keys))
	for i, k := range keys {
		recs[i] = kmsg.Record{Value: []byte("v")}
		if k != "" {
			recs[i].Key = []byte(k)
		}
	}
	return batchtest.PlainBatch(recs...)
}

// The other client libraries' producers with acks=1 are refused under
// acks: all, and succeed with acks=all.
func TestGovernanceAcksClients(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "orders.acks")})
	applyPolicies(t, env, policy.Rule{Name: "acks-all", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"Produce"}}, Require: &policy.Require{Acks: "all"}})

	t.Run("sarama", func(t *testing.T) {
		for _, acks := range []sarama.RequiredAcks{sarama.WaitForLocal, sarama.WaitForAll} {
			cfg := saramaConfig(&viaDialer{want: env.addr})
			cfg.Producer.RequiredAcks = acks
			cfg.Producer.Return.Successes = true
			cfg.Producer.Retry.Max = 0
			p, err := sarama.NewSyncProducer([]string{env.addr}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: "orders.acks", Value: sarama.StringEncoder("v")})
			p.Close()
			switch {
			case acks == sarama.WaitForLocal && !errors.Is(err, sarama.ErrInvalidRequiredAcks):
				t.Errorf("acks=1: %v, want ErrInvalidRequiredAcks", err)
			case acks == sarama.WaitForAll && err != nil:
				t.Errorf("acks=all: %v", err)
			}
		}
	})
	t.Run("kafka-go", func(t *testing.T) {
		for _, acks := range []kafka.RequiredAcks{kafka.RequireOne, kafka.RequireAll} {
			tr := &kafka.Transport{Dial: (&viaDialer{want: env.addr}).DialContext}
			w := &kafka.Writer{Addr: kafka.TCP(env.addr), Topic: "orders.acks", RequiredAcks: acks, Transport: tr, MaxAttempts: 1}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := w.WriteMessages(ctx, kafka.Message{Value: []byte("v")})
			cancel()
			w.Close()
			tr.CloseIdleConnections()
			switch {
			case acks == kafka.RequireOne && !writeFailed(err, kafka.InvalidRequiredAcks):
				t.Errorf("acks=1: %v, want InvalidRequiredAcks", err)
			case acks == kafka.RequireAll && err != nil:
				t.Errorf("acks=all: %v", err)
			}
		}
	})
	if got := consumeAll(t, env, "orders.acks"); got != 2 {
		t.Errorf("orders.acks holds %d records, want the 2 produced with acks=all", got)
	}
}

// A log-only producer rule relays every record unchanged and counts.
func TestGovernanceProduceLogOnly(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "orders.log")})
	ps := applyPolicies(t, env, producerStandards(policy.ActionLog))
	if err := franzProduce(t, env, &kgo.Record{Topic: "orders.log", Value: okValue}, kgo.ProducerBatchCompression(kgo.NoCompression())); err != nil {
		t.Fatalf("log-only rule refused: %v", err)
	}
	if got := consumeAll(t, env, "orders.log"); got != 1 {
		t.Errorf("orders.log holds %d records, want 1", got)
	}
	if got := violations(t, ps, "producer-standards", "compression"); got != 1 {
		t.Errorf("violations{compression} = %v, want 1", got)
	}
	if !strings.Contains(env.logs.String(), `"rule":"producer-standards"`) {
		t.Errorf("no log line names the rule:\n%s", env.logs)
	}
}

// consumeAll counts the records the broker holds in a topic (its end
// offsets, asked through kproxy: no topic here is ever trimmed).
func consumeAll(t *testing.T, env *testEnv, topic string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := 0
	for _, c := range endOffsets(t, cl, ctx, topic) {
		n += c
	}
	return n
}

// endOffsets lists a topic's end offsets per partition.
func endOffsets(t *testing.T, cl *kgo.Client, ctx context.Context, topic string) map[int32]int {
	t.Helper()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int{}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[o.Partition] = int(o.Offset)
		}
	})
	return out
}

// writeFailed reports whether a kafka-go Writer's error is, or holds for
// every message, the Kafka error want.
func writeFailed(err error, want kafka.Error) bool {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if !errors.Is(e, want) {
				return false
			}
		}
		return len(we) > 0
	}
	return errors.Is(err, want)
}

// acks=0 cannot be answered: a violation closes the connection with a
// log line naming the rule, as size refusals do.
func TestGovernanceAcksZeroCloses(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "t")})
	ps := applyPolicies(t, env, policy.Rule{Name: "acks-one", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"Produce"}}, Require: &policy.Require{Acks: "1"}})
	c := dialRaw(t, env.addr)
	if _, err := c.Write(encodeRequest(produceRequest(9, 0, "t"), 1)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c, 10*time.Second)
	waitFor(t, 10*time.Second, "the close counted for its rule", func() bool {
		return ps.count(t, "kproxy_policy_closed_total", "acks-one") >= 1 && env.logs.contains("acks-one")
	})
	// acks=1 passes the same rule.
	c2 := dialRaw(t, env.addr)
	defer c2.Close()
	ok := produceRequest(9, 1, "t")
	ok.Topics[0].Partitions[0].Records = batchOf([]string{"k"})
	resp := ask(t, c2, ok, 2).(*kmsg.ProduceResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("acks=1 under acks: 1: code %d", code)
	}
}

// A batch past the record path's budget cannot be judged: the rule fails
// closed for that partition, saying why, and the partitions read within
// it are judged and written.
func TestGovernanceRecordBudgetFailsClosed(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(5, "bomb")})
	applyPolicies(t, env, policy.Rule{Name: "traced", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"Produce"}}, Require: &policy.Require{Headers: []string{"traceparent"}}})
	// Five partitions of a record of a little over 16 MiB each: three fit
	// the 64 MiB a rule may inflate for one request; the fourth is cut
	// at the budget and the fifth is not opened.
	c := dialRaw(t, env.addr)
	defer c.Close()
	if _, err := c.Write(bombRequest(t, zstdBombBatch(t), 5, 3)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	f, err := readFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	resp := decodeResponse(t, f, 0, 9).(*kmsg.ProduceResponse)
	codes := map[int32]kmsg.ProduceResponseTopicPartition{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[rp.Partition] = rp
		}
	}
	for p := int32(0); p < 3; p++ {
		if codes[p].ErrorCode != 0 {
			t.Errorf("partition %d within the budget: code %d", p, codes[p].ErrorCode)
		}
	}
	for _, p := range []int32{3, 4} {
		if c := codes[p]; c.ErrorCode != kerr.InvalidRecord.Code || c.ErrorMessage == nil ||
			!strings.Contains(*c.ErrorMessage, "records not read (over the record path's max_decompressed_bytes), so headers cannot be judged") {
			t.Errorf("partition %d past the budget: %+v, want INVALID_RECORD saying why", p, c)
		}
	}
}
