package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
)

// clusterRecords is how many records each client round-trips through a
// cluster-mode kproxy: enough for every partition of every broker, few
// enough for a loaded machine under -race.
const clusterRecords = 3000

// wantEveryNode fails unless the client dialled the bootstrap and the
// node port of every one of brokers.
func wantEveryNode(t testing.TB, env *clusterEnv, dialled map[string]bool, brokers int) {
	t.Helper()
	want := []string{env.addr}
	for n := 0; n < brokers; n++ {
		want = append(want, env.nodeAddr(int32(n)))
	}
	for _, a := range want {
		if !dialled[a] {
			t.Errorf("client never dialled %s (dialled %v): its broker was not reached through kproxy", a, dialled)
		}
	}
}

// TestClusterSarama: sarama bootstraps through a cluster-mode kproxy in
// front of three kfake brokers, produces to partitions led by every broker
// with an idempotent producer and consumes them all back in a group,
// dialling nothing but kproxy's listeners.
func TestClusterSarama(t *testing.T) {
	const topic, partitions = "sarama-spread", 6
	env := startSpread(t, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pdials, cdials := &addrDialer{}, &addrDialer{}

	pcfg := saramaConfig(nil)
	pcfg.Net.Proxy.Dialer = pdials
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Idempotent = true
	pcfg.Net.MaxOpenRequests = 1
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.Partitioner = sarama.NewManualPartitioner
	pcl, err := sarama.NewClient([]string{env.addr}, pcfg)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer pcl.Close()
	prod, err := sarama.NewSyncProducerFromClient(pcl)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < clusterRecords; i += 100 {
		var msgs []*sarama.ProducerMessage
		for j := i; j < i+100; j++ {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Partition: int32(j % partitions),
				Key: sarama.ByteEncoder(keyOf(j)), Value: sarama.ByteEncoder(valueOf(j))})
		}
		if err := prod.SendMessages(msgs); err != nil {
			var perrs sarama.ProducerErrors
			if errors.As(err, &perrs) && len(perrs) > 0 {
				t.Fatalf("produce: %d records failed, first: %v", len(perrs), perrs[0])
			}
			t.Fatalf("produce: %v", err)
		}
	}
	if err := prod.Close(); err != nil {
		t.Fatalf("close producer: %v", err)
	}
	wantEveryNode(t, env, pdials.check(t, env), 3)
	// What sarama learnt from Metadata: kproxy's node port for each broker.
	brokers := pcl.Brokers()
	if len(brokers) != 3 {
		t.Fatalf("sarama knows %d brokers, want 3", len(brokers))
	}
	for _, b := range brokers {
		if b.Addr() != env.nodeAddr(b.ID()) {
			t.Fatalf("sarama knows broker %d at %s, not kproxy's node port %s", b.ID(), b.Addr(), env.nodeAddr(b.ID()))
		}
	}
	for p := int32(0); p < partitions; p++ {
		if hw := env.kc.PartitionInfo(topic, p).HighWatermark; hw != clusterRecords/partitions {
			t.Fatalf("partition %d (node %d) holds %d records, want %d", p, p%3, hw, clusterRecords/partitions)
		}
	}

	ccfg := saramaConfig(nil)
	ccfg.Net.Proxy.Dialer = cdials
	ccl, err := sarama.NewClient([]string{env.addr}, ccfg)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer ccl.Close()
	l := saramaConsumeAll(ctx, t, ccl, "sarama-spread-group", topic, clusterRecords)
	l.verify(t, clusterRecords)

	wantEveryNode(t, env, cdials.check(t, env), 3)
}

// TestClusterKafkaGo: kafka-go's Writer and group Reader bootstrap through
// a cluster-mode kproxy in front of three kfake brokers and round-trip
// records through partitions led by every broker, dialling nothing but
// kproxy's listeners.
func TestClusterKafkaGo(t *testing.T) {
	const topic, partitions = "kafkago-spread", 6
	env := startSpread(t, topic, partitions)
	wdials, rdials := &addrDialer{}, &addrDialer{}
	errLog := &kafkaGoLog{}
	defer errLog.dump(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	tr := &kafka.Transport{Dial: wdials.DialContext, ClientID: "kproxy-cluster-kafka-go"}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(env.addr),
		Topic:        topic,
		Balancer:     &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    200,
		BatchTimeout: 5 * time.Millisecond,
		Transport:    tr,
		ErrorLogger:  errLog,
	}
	kafkaGoWrite(ctx, t, w, clusterRecords)
	for p := int32(0); p < partitions; p++ {
		if hw := env.kc.PartitionInfo(topic, p).HighWatermark; hw == 0 {
			t.Fatalf("partition %d (node %d) got no record", p, p%3)
		}
	}

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     []string{env.addr},
		GroupID:     "kafkago-spread-group",
		Topic:       topic,
		StartOffset: kafka.FirstOffset,
		Dialer: &kafka.Dialer{ClientID: "kproxy-cluster-kafka-go", Timeout: 10 * time.Second,
			DialFunc: rdials.DialContext},
		MaxWait:     2 * time.Second,
		ErrorLogger: errLog,
	})
	defer r.Close()
	l := newLedger()
	for len(l.seen) < clusterRecords {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("consume after %d records: %v", len(l.seen), err)
		}
		l.add(m.Key, m.Value)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close reader: %v", err)
	}
	l.verify(t, clusterRecords)

	wantEveryNode(t, env, wdials.check(t, env), 3)
	wantEveryNode(t, env, rdials.check(t, env), 3)
}
