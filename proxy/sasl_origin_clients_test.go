package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kproxy/kproxy/sasl"
)

// originClientRecords is how many records each client round-trips.
const originClientRecords = 2000

// TestSaslOriginSarama: sarama, configured without SASL, produces and
// consumes (a consumer group) through kproxy authenticating with
// SCRAM-SHA-512.
func TestSaslOriginSarama(t *testing.T) {
	const topic = "origin-sarama"
	env := startOrigin(t, sasl.ScramSHA512, rightPassword, []kfake.Opt{kfake.SeedTopics(2, topic)})
	dials := &viaDialer{want: env.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := saramaConfig(dials)
	if cfg.Net.SASL.Enable {
		t.Fatal("the client must have no SASL settings")
	}
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cl := saramaNewClient(t, env.testEnv, cfg)
	prod, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	msgs := make([]*sarama.ProducerMessage, originClientRecords)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(keyOf(i)), Value: sarama.ByteEncoder(valueOf(i))}
	}
	if err := prod.SendMessages(msgs); err != nil {
		var perrs sarama.ProducerErrors
		if errors.As(err, &perrs) && len(perrs) > 0 {
			t.Fatalf("produce: %d of %d failed, e.g. %v", len(perrs), len(msgs), perrs[0].Err)
		}
		t.Fatalf("produce: %v", err)
	}
	l := saramaConsumeAll(ctx, t, cl, "origin-sarama-group", topic, originClientRecords)
	l.verify(t, originClientRecords)
	saramaCheckBrokers(t, env.testEnv, cl)
	dials.check(t)
	checkOriginated(t, env)
}

// TestSaslOriginKafkaGo: kafka-go, configured without SASL, produces and
// consumes (a consumer group) through kproxy authenticating with
// SCRAM-SHA-512.
func TestSaslOriginKafkaGo(t *testing.T) {
	const topic = "origin-kafkago"
	env := startOrigin(t, sasl.ScramSHA512, rightPassword, []kfake.Opt{kfake.SeedTopics(2, topic)})
	wdials := &viaDialer{want: env.addr}
	rdials := &viaDialer{want: env.addr}
	errLog := &kafkaGoLog{}
	defer errLog.dump(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := &kafka.Transport{Dial: wdials.DialContext, ClientID: "kproxy-kafka-go-test"} // no SASL
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(env.addr), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchSize: 500, BatchTimeout: 5 * time.Millisecond, Transport: tr, ErrorLogger: errLog}
	kafkaGoWrite(ctx, t, w, originClientRecords)
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{env.addr}, GroupID: "origin-kafkago-group", Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 2 * time.Second, ErrorLogger: errLog,
		Dialer: &kafka.Dialer{ClientID: "kproxy-kafka-go-test", Timeout: 10 * time.Second, DialFunc: rdials.DialContext}})
	defer r.Close()
	l := newLedger()
	for len(l.seen) < originClientRecords {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("consume after %d records: %v", len(l.seen), err)
		}
		l.add(m.Key, m.Value)
	}
	l.verify(t, originClientRecords)
	wdials.check(t)
	rdials.check(t)
	checkOriginated(t, env)
}

// checkOriginated fails t unless kproxy authenticated every upstream
// connection itself, none failing, and the broker saw only kproxy's SASL.
func checkOriginated(t testing.TB, env *originEnv) {
	t.Helper()
	// A connection a client opens in the background may be mid-way through
	// kproxy's authentication: the broker counts its SaslHandshake before
	// kproxy counts the outcome.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if float64(env.keys(17)) == env.auths("initial", "ok") {
			break
		}
	}
	ok, failed := env.auths("initial", "ok"), env.auths("initial", "error")
	if ok < 1 || failed != 0 {
		t.Fatalf("initial authentications: %v ok, %v failed", ok, failed)
	}
	if hs := env.keys(17); float64(hs) != ok {
		t.Fatalf("the broker saw %d SaslHandshake for %v authentications by kproxy", hs, ok)
	}
}
