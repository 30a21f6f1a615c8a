package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

// kafkaGoLog keeps kafka-go's error log so a failing test can show it
// without logging to t from kafka-go's goroutines after the test ended.
type kafkaGoLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *kafkaGoLog) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) < 200 {
		l.lines = append(l.lines, fmt.Sprintf(format, args...))
	}
}

// dump logs what kafka-go reported, if the test failed.
func (l *kafkaGoLog) dump(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.Failed() && len(l.lines) > 0 {
		t.Logf("kafka-go errors:\n%s", strings.Join(l.lines, "\n"))
	}
}

// TestKafkaGoProduceConsumeGroup round-trips recordCount keyed records with
// a batching acks=all Writer and a consumer-group Reader, both dialling
// through a recorder that allows only kproxy's address.
func TestKafkaGoProduceConsumeGroup(t *testing.T) {
	const topic = "kafkago"
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(4, topic)})
	wdials := &viaDialer{want: env.addr} // the Writer's Transport
	rdials := &viaDialer{want: env.addr} // the Reader's Dialer
	errLog := &kafkaGoLog{}
	defer errLog.dump(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tr := &kafka.Transport{Dial: wdials.DialContext, ClientID: "kproxy-kafka-go-test"}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(env.addr),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    5000,
		BatchBytes:   1 << 20,
		BatchTimeout: 5 * time.Millisecond,
		Transport:    tr,
		ErrorLogger:  errLog,
	}
	kafkaGoWrite(ctx, t, w, recordCount)
	if st := w.Stats(); st.Errors != 0 || st.Messages != recordCount {
		t.Fatalf("writer stats: %d messages, %d errors", st.Messages, st.Errors)
	}

	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     []string{env.addr},
		GroupID:     "kafkago-group",
		Topic:       topic,
		StartOffset: kafka.FirstOffset,
		Dialer: &kafka.Dialer{ClientID: "kproxy-kafka-go-test", Timeout: 10 * time.Second,
			DialFunc: rdials.DialContext},
		MaxBytes: 4 << 20,
		// kafka-go's read deadline is MaxWait and the Fetch asks the
		// broker to wait MaxWait less a second: leave that second for a
		// large response under -race, or reads time out and retry.
		MaxWait:     2 * time.Second,
		ErrorLogger: errLog,
	})
	defer r.Close()
	l := newLedger()
	last := map[int]kafka.Message{} // newest message per partition, to commit
	for len(l.seen) < recordCount {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("consume after %d records: %v", len(l.seen), err)
		}
		l.add(m.Key, m.Value)
		last[m.Partition] = m
	}
	commit := make([]kafka.Message, 0, len(last))
	for _, m := range last {
		commit = append(commit, m)
	}
	if err := r.CommitMessages(ctx, commit...); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close reader: %v", err)
	}
	l.verify(t, recordCount)

	wdials.check(t)
	rdials.check(t)
	for _, api := range []string{"Produce", "Fetch", "JoinGroup", "SyncGroup", "OffsetCommit"} {
		if env.requests(api) == 0 {
			t.Errorf("kproxy saw no %s request", api)
		}
	}
}

// firstErr is the first non-nil error of a kafka.WriteErrors.
func firstErr(errs kafka.WriteErrors) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// kafkaGoWrite produces records 0..n-1 with w in one call (the Writer
// batches per partition and reports every message that failed) and
// closes it.
func kafkaGoWrite(ctx context.Context, t testing.TB, w *kafka.Writer, n int) {
	t.Helper()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: keyOf(i), Value: valueOf(i)}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		var werrs kafka.WriteErrors
		if errors.As(err, &werrs) {
			t.Fatalf("produce: %d of %d messages failed, e.g. %v", werrs.Count(), len(werrs), firstErr(werrs))
		}
		t.Fatalf("produce: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close writer: %v", err)
	}
}
