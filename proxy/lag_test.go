package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/telemetry"
)

// lagOf reads kproxy_consumer_lag_records (and _seconds) for one
// partition from reg; ok is false while the series is absent.
func lagOf(t *testing.T, reg *prometheus.Registry, client, group, topic, partition string) (records, seconds float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seconds = -1
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if !labelled(m, "client_id", client, "group", group, "topic", topic, "partition", partition) {
				continue
			}
			switch mf.GetName() {
			case "kproxy_consumer_lag_records":
				records, ok = m.GetGauge().GetValue(), true
			case "kproxy_consumer_lag_seconds":
				seconds = m.GetGauge().GetValue()
			}
		}
	}
	return records, seconds, ok
}

func labelled(m *dto.Metric, kv ...string) bool {
	want := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		want[kv[i]] = kv[i+1]
	}
	n := 0
	for _, lp := range m.Label {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// startLagKfake is kfake behind a kproxy with telemetry.lag on, with the
// registry its lag series are read from.
func startLagKfake(t *testing.T, topics ...string) (*testEnv, *prometheus.Registry) {
	lag := telemetry.NewLag(telemetry.LagConfig{Enabled: true, MaxSeries: 100})
	reg := prometheus.NewRegistry()
	lag.Register(reg)
	env := startKfakeWith(t, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, topics...)},
		func(s *Server) { s.SetLag(lag) }, nil)
	return env, reg
}

// produceOneByOne writes n records to topic, each its own batch.
func produceOneByOne(t *testing.T, env *testEnv, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Key: keyOf(i), Value: valueOf(i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// TestConsumerLagFranz: a franz-go group consumer reading one batch per
// fetch is reported behind, under its client id and the group its group
// requests named, while it has records to read, and at 0 once it has
// read them all.
func TestConsumerLagFranz(t *testing.T) {
	env, reg := startLagKfake(t, "lagged")
	produceOneByOne(t, env, "lagged", 100)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.ClientID("lag-consumer"), kgo.ConsumerGroup("lag-group"),
		kgo.ConsumeTopics("lagged"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1)) // one batch per fetch
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	read := 0
	for read == 0 {
		fs := cons.PollRecords(ctx, 1)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		read += fs.NumRecords()
	}
	var behind, age float64
	waitFor(t, 20*time.Second, "a lag series for lag-consumer in lag-group", func() bool {
		r, s, ok := lagOf(t, reg, "lag-consumer", "lag-group", "lagged", "0")
		behind, age = r, s
		return ok && r > 0
	})
	if behind > 100 || age < 0 {
		t.Fatalf("lag %v records, %v s, with 100 records in the partition and %d read", behind, age, read)
	}
	for read < 100 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 100: %v", read, ctx.Err())
		}
		read += fs.NumRecords()
	}
	waitFor(t, 20*time.Second, "lag-consumer's lag back to 0", func() bool {
		r, s, ok := lagOf(t, reg, "lag-consumer", "lag-group", "lagged", "0")
		return ok && r == 0 && s == 0
	})
}

// TestConsumerLagSarama: sarama sends a full Fetch request every time
// (no fetch session); its lag is measured the same way.
func TestConsumerLagSarama(t *testing.T) {
	env, reg := startLagKfake(t, "lagged")
	produceOneByOne(t, env, "lagged", 30)
	d := &viaDialer{want: env.addr}
	cfg := saramaConfig(d)
	cfg.ClientID = "lag-sarama"
	cl := saramaNewClient(t, env, cfg)
	group, err := sarama.NewConsumerGroupFromClient("lag-sarama-group", cl)
	if err != nil {
		t.Fatal(err)
	}
	defer group.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := &countingHandler{want: 30, done: make(chan struct{})}
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{"lagged"}, h); err != nil {
				return
			}
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
		t.Fatalf("sarama read %d of 30", h.n)
	}
	waitFor(t, 20*time.Second, "lag-sarama's lag at 0 in its group", func() bool {
		r, _, ok := lagOf(t, reg, "lag-sarama", "lag-sarama-group", "lagged", "0")
		return ok && r == 0
	})
	produceOneByOne(t, env, "lagged", 5) // the group reads them too; the series must stay sane
	text := gatherText(t, reg)
	if !strings.Contains(text, `kproxy_consumer_lag_partitions{export="own"}`) {
		t.Fatalf("no partition count:\n%s", text)
	}
}

type countingHandler struct {
	n    int
	want int
	done chan struct{}
}

func (h *countingHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *countingHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *countingHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.n++
		if h.n == h.want {
			close(h.done)
		}
	}
	return nil
}

// gatherText is reg's exposition, one "name{labels} value" per line.
func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			for _, lp := range m.Label {
				ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			fmt.Fprintf(&b, "%s{%s} %v\n", mf.GetName(), strings.Join(ls, ","), m.GetGauge().GetValue()+m.GetCounter().GetValue())
		}
	}
	return b.String()
}
