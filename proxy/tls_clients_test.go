package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tlsRecords is how many keyed records each client round-trips per
// combination: enough for several batches each way.
const tlsRecords = 300

// The four combinations of TLS on kproxy's two sides, and mTLS on each:
// franz-go, sarama and kafka-go produce keyed records through kproxy and
// read every one back.
func TestTLSClientsRoundTrip(t *testing.T) {
	for _, sides := range []tlsSides{
		{client: true},                 // the broker-pod sidecar terminates TLS
		{upstream: true},               // the client-pod sidecar originates TLS
		{client: true, upstream: true}, // TLS on both
		{client: true, mutual: true, upstream: true, upstreamMutual: true}, // mTLS on both
	} {
		t.Run(sides.String(), func(t *testing.T) {
			const topic = "tls"
			w := startTLSKfake(t, sides, []kfake.Opt{kfake.SeedTopics(3, topic)}, nil)
			cfg := w.clientTLS(t, sides, "app", "spiffe://cluster.local/ns/payments/sa/app")
			t.Run("franz-go", func(t *testing.T) { franzRoundTrip(t, w.addr, cfg, topic, "franz") })
			t.Run("sarama", func(t *testing.T) { saramaRoundTrip(t, w.addr, cfg, topic, "sarama") })
			t.Run("kafka-go", func(t *testing.T) { kafkaGoRoundTrip(t, w.addr, cfg, topic, "kafkago") })
			if sides.client {
				if n := w.handshakes("client", "ok"); n == 0 {
					t.Error("no client handshake counted ok")
				}
			}
			if sides.upstream {
				if n := w.handshakes("upstream", "ok"); n == 0 {
					t.Error("no upstream handshake counted ok")
				}
			}
		})
	}
}

// franzRoundTrip produces tlsRecords keyed records (keys prefixed with
// prefix) through addr and reads them back.
func franzRoundTrip(t *testing.T, addr string, cfg *tls.Config, topic, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks())}
	if cfg != nil {
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range tlsRecords {
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprintf("%s-%d", prefix, i)), Value: valueOf(i)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]bool{}
	for len(seen) < tlsRecords {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume after %d records: %v", len(seen), err)
		}
		fs.EachRecord(func(r *kgo.Record) { mark(seen, prefix, r.Key, r.Value) })
	}
}

// saramaRoundTrip is franzRoundTrip with sarama.
func saramaRoundTrip(t *testing.T, addr string, cfg *tls.Config, topic, prefix string) {
	sc := saramaConfig(&viaDialer{want: addr})
	sc.Producer.Return.Successes = true
	sc.Producer.RequiredAcks = sarama.WaitForAll
	if cfg != nil {
		sc.Net.TLS.Enable, sc.Net.TLS.Config = true, cfg
	}
	cl, err := sarama.NewClient([]string{addr}, sc)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer cl.Close()
	prod, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	// Closing the client does not stop a producer made from it: left
	// open, its goroutines outlive the test and fail later tests' leak
	// checks (TestNetworkFaultsLoseNothing's).
	defer prod.Close()
	var msgs []*sarama.ProducerMessage
	for i := range tlsRecords {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: topic,
			Key: sarama.StringEncoder(fmt.Sprintf("%s-%d", prefix, i)), Value: sarama.ByteEncoder(valueOf(i))})
	}
	if err := prod.SendMessages(msgs); err != nil {
		t.Fatalf("produce: %v", err)
	}
	cons, err := sarama.NewConsumerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	parts, err := cl.Partitions(topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	deadline := time.After(2 * time.Minute)
	for _, p := range parts {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		hw := pc.HighWaterMarkOffset()
		for next := int64(0); next < hw; {
			select {
			case m := <-pc.Messages():
				mark(seen, prefix, m.Key, m.Value)
				next = m.Offset + 1
			case err := <-pc.Errors():
				t.Fatalf("consume: %v", err)
			case <-deadline:
				t.Fatalf("consume: %d of %d records after 2 minutes", len(seen), tlsRecords)
			}
		}
		pc.Close()
	}
	if len(seen) != tlsRecords {
		t.Fatalf("read back %d of %d records", len(seen), tlsRecords)
	}
}

// kafkaGoRoundTrip is franzRoundTrip with kafka-go.
func kafkaGoRoundTrip(t *testing.T, addr string, cfg *tls.Config, topic, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errLog := &kafkaGoLog{}
	defer errLog.dump(t)
	tr := &kafka.Transport{TLS: cfg, ClientID: "kproxy-kafka-go-tls-test"}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond, Transport: tr, ErrorLogger: errLog}
	var msgs []kafka.Message
	for i := range tlsRecords {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("%s-%d", prefix, i)), Value: valueOf(i)})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		var werrs kafka.WriteErrors
		if errors.As(err, &werrs) {
			t.Fatalf("produce: %d of %d messages failed, e.g. %v", werrs.Count(), len(werrs), firstErr(werrs))
		}
		t.Fatalf("produce: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, GroupID: prefix + "-group", Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 2 * time.Second, ErrorLogger: errLog,
		Dialer: &kafka.Dialer{ClientID: "kproxy-kafka-go-tls-test", Timeout: 10 * time.Second, TLS: cfg}})
	defer r.Close()
	seen := map[string]bool{}
	for len(seen) < tlsRecords {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("consume after %d records: %v", len(seen), err)
		}
		mark(seen, prefix, m.Key, m.Value)
	}
}

// mark records a record read back whose key has prefix (other clients'
// records share the topic), checking its value against its key.
func mark(seen map[string]bool, prefix string, key, value []byte) {
	var i int
	if _, err := fmt.Sscanf(string(key), prefix+"-%d", &i); err != nil || i < 0 || i >= tlsRecords {
		return
	}
	if string(value) == string(valueOf(i)) {
		seen[string(key)] = true
	}
}
