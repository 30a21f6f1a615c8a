package proxy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/embedded"
)

// faultWorld is kproxy between two real fault-injecting TCP proxies
// (toxiproxy, as a library): clients -> down -> kproxy -> up -> kfake. The
// broker advertises down's address, so every client connection crosses
// both.
type faultWorld struct {
	*testEnv
	down, up *toxiproxy.Proxy
	client   string // what clients dial: down's address
}

func startFaultWorld(t *testing.T, topic string, partitions int32) *faultWorld {
	t.Helper()
	quietToxics.Do(func() { zlog.Logger = zerolog.Nop() }) // toxiproxy's toxics log every pipe through zerolog's global logger
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	b, err := embedded.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	up := toxiproxy.NewProxy(srv, "up", "127.0.0.1:0", b.Addr())
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Stop)
	env := startProxy(t, up.Listen, func(c *Config, f *framing.Config, _ *correlate.Config) {
		f.ReadTimeout = 5 * time.Second // a frame cut mid-way is closed within this
		c.WriteTimeout = 5 * time.Second
		c.MaxBufferedBytes = 256 << 20
	})
	down := toxiproxy.NewProxy(srv, "down", "127.0.0.1:0", env.addr)
	if err := down.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Stop)
	c, err := b.Start(down.Listen, kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env.cluster = c
	return &faultWorld{testEnv: env, down: down, up: up, client: down.Listen}
}

// quietToxics silences toxiproxy's own logging once; kproxy does not use
// zerolog's global logger.
var quietToxics sync.Once

// toxic adds a toxic to p; the JSON attributes are toxiproxy's.
func toxic(t *testing.T, p *toxiproxy.Proxy, name, kind, stream string, attrs string) {
	t.Helper()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, kind, stream, attrs)
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("toxic %s: %v", name, err)
	}
}

func untoxic(p *toxiproxy.Proxy, name string) { _ = p.Toxics.RemoveToxic(context.Background(), name) }

// produceAcked produces n records (values v-0..) with an idempotent
// franz-go producer through w and returns the values the broker
// acknowledged; records whose produce failed are not counted acked.
func produceAcked(t *testing.T, w *faultWorld, topic string, n int) map[string]bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.client), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	acked := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		v := fmt.Sprintf("v-%06d", i)
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				acked[string(r.Value)] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return acked
}

// consumeGroup reads topic through w with a consumer group until it has
// every value in want, and returns how often each value was read.
func consumeGroup(t *testing.T, w *faultWorld, topic, group string, want map[string]bool) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.client), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(45*time.Second),
		kgo.RequestTimeoutOverhead(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for missing := len(want); missing > 0; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group read %d of %d acknowledged records: %v", len(want)-missing, len(want), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if seen[v]++; seen[v] == 1 && want[v] {
				missing--
			}
		})
	}
	return seen
}

// logContents reads the whole topic once, with no faults, as a fresh
// consumer: what the broker holds.
func logContents(t *testing.T, w *faultWorld, topic string, atLeast int) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	held := map[string]int{}
	total := 0
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for total < atLeast {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { held[string(r.Value)]++; total++ })
	}
	// Anything written after what was asked for comes within a moment.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	cl.PollFetches(ctx2).EachRecord(func(r *kgo.Record) { held[string(r.Value)]++ })
	return held
}

// toggleFaults, until the test ends, turns faults on and off on both
// sides of kproxy every 700 ms: the upstream reset, a connection cut after
// a few KB (mid-frame) each way, the client side reset.
func toggleFaults(t *testing.T, w *faultWorld) { stopFaults(t, w) }

// stopFaults is toggleFaults that can be ended before the test: the
// returned func stops the toggling (once).
func stopFaults(t *testing.T, w *faultWorld) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	var once sync.Once
	end := func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(end)
	go func() {
		defer close(done)
		kinds := []struct {
			p                   *toxiproxy.Proxy
			kind, stream, attrs string
		}{
			{w.up, "reset_peer", "upstream", `{"timeout":200}`},
			{w.down, "limit_data", "downstream", `{"bytes":3000}`},
			{w.up, "limit_data", "upstream", `{"bytes":5000}`},
			{w.down, "reset_peer", "upstream", `{"timeout":300}`},
		}
		for i := 0; ; i++ {
			k := kinds[i%len(kinds)]
			js := fmt.Sprintf(`{"name":"t","type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, k.kind, k.stream, k.attrs)
			k.p.Toxics.AddToxicJson(strings.NewReader(js))
			select {
			case <-stop:
				untoxic(k.p, "t")
				return
			case <-time.After(700 * time.Millisecond):
			}
			untoxic(k.p, "t")
			select {
			case <-stop:
				return
			case <-time.After(700 * time.Millisecond):
			}
		}
	}()
	return end
}

// Records survive real network faults on both sides of kproxy: under
// latency with jitter, a bandwidth cap, TCP segments of a few bytes
// (frames split everywhere), connections reset or cut mid-frame, and
// toxics toggled every second, every record the broker acknowledged to an
// idempotent producer is in the log exactly once and read by a consumer
// group; afterwards every kproxy connection whose peer vanished is
// closed, no goroutines are left behind and the budget is within its
// bound (issue 27, "Real network faults").
func TestNetworkFaultsLoseNothing(t *testing.T) {
	scenarios := []struct {
		name string
		on   func(t *testing.T, w *faultWorld)
	}{
		{"latency-jitter", func(t *testing.T, w *faultWorld) {
			toxic(t, w.down, "lat", "latency", "downstream", `{"latency":20,"jitter":15}`)
			toxic(t, w.up, "lat", "latency", "upstream", `{"latency":10,"jitter":10}`)
		}},
		{"bandwidth", func(t *testing.T, w *faultWorld) {
			toxic(t, w.up, "bw", "bandwidth", "upstream", `{"rate":256}`) // KB/s
			toxic(t, w.down, "bw", "bandwidth", "downstream", `{"rate":256}`)
		}},
		{"slicer", func(t *testing.T, w *faultWorld) {
			toxic(t, w.down, "sl", "slicer", "upstream", `{"average_size":3,"size_variation":2,"delay":50}`)
			toxic(t, w.up, "sl", "slicer", "downstream", `{"average_size":5,"size_variation":4,"delay":50}`)
		}},
		{"toggled", toggleFaults},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			const topic, records = "faults", 1500
			w := startFaultWorld(t, topic, 3)
			before, _ := kproxyGoroutines()
			sc.on(t, w)
			acked := produceAcked(t, w, topic, records)
			if len(acked) < records/2 {
				t.Fatalf("only %d of %d records acknowledged", len(acked), records)
			}
			read := consumeGroup(t, w, topic, "g-"+sc.name, acked)
			w.down.Toxics.ResetToxics(context.Background())
			w.up.Toxics.ResetToxics(context.Background())
			held := logContents(t, w, topic, len(acked))
			for v := range acked {
				switch n := held[v]; {
				case n == 0:
					t.Errorf("acknowledged record %s is not in the log", v)
				case n > 1:
					t.Errorf("acknowledged record %s is in the log %d times (the idempotent producer's retries duplicated it)", v, n)
				}
				if read[v] == 0 {
					t.Errorf("acknowledged record %s was never read by the group", v)
				}
			}
			t.Logf("%d of %d acknowledged; the group read %d distinct; kproxy took %v connections",
				len(acked), records, len(read), testutil.ToFloat64(w.m.Accepted))
			if sc.name == "toggled" && testutil.ToFloat64(w.m.Accepted) < 6 {
				t.Fatalf("the toggled faults cut no connection (%v accepted)", testutil.ToFloat64(w.m.Accepted))
			}
			// Every client has gone: kproxy holds nothing of them.
			waitFor(t, 20*time.Second, "every kproxy connection closed", func() bool {
				return testutil.ToFloat64(w.m.Open) == 0
			})
			waitGoroutinesBack(t, before, 10)
			if b := testutil.ToFloat64(w.m.Buffered); b > 256<<20 {
				t.Errorf("buffered %v over the budget", b)
			}
		})
	}
}

// The same faults with sarama's idempotent producer and kafka-go's
// consumer group: every acknowledged record is in the log once and read.
func TestNetworkFaultsSaramaKafkaGo(t *testing.T) {
	const topic, records = "faults-clients", 1500
	w := startFaultWorld(t, topic, 3)
	before, _ := kproxyGoroutines()
	toxic(t, w.down, "lat", "latency", "downstream", `{"latency":5,"jitter":5}`)
	endToggling := stopFaults(t, w)

	cfg := saramaConfig(&viaDialer{want: w.client})
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = 10*time.Second, 10*time.Second
	cfg.Producer.Retry.Max = 100
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes, cfg.Producer.Return.Errors = true, true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cl, err := sarama.NewClient([]string{w.client}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := sarama.NewAsyncProducerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := range records {
			v := sarama.StringEncoder(fmt.Sprintf("s-%06d", i))
			prod.Input() <- &sarama.ProducerMessage{Topic: topic, Key: v, Value: v}
		}
	}()
	acked := map[string]bool{}
	deadline := time.After(2 * time.Minute)
	for n := 0; n < records; n++ {
		select {
		case m := <-prod.Successes():
			b, _ := m.Value.Encode()
			acked[string(b)] = true
		case <-prod.Errors():
		case <-deadline:
			t.Fatalf("sarama: %d of %d answered in 2 minutes", n, records)
		}
	}
	prod.Close()
	cl.Close()
	// kafka-go's group reader reads under latency and segments of a few
	// bytes; the resets and cuts end with the production.
	endToggling()
	toxic(t, w.up, "sl", "slicer", "downstream", `{"average_size":64,"size_variation":60,"delay":5}`)
	if len(acked) < records/2 {
		t.Fatalf("only %d of %d acknowledged", len(acked), records)
	}

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{w.client}, GroupID: "g-kafkago", Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 2 * time.Second,
		Dialer: &kafka.Dialer{Timeout: 10 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	read := map[string]int{}
	for missing := len(acked); missing > 0; {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("kafka-go read %d of %d: %v", len(acked)-missing, len(acked), err)
			}
			continue
		}
		if read[string(m.Value)]++; read[string(m.Value)] == 1 && acked[string(m.Value)] {
			missing--
		}
		_ = r.CommitMessages(ctx, m)
	}
	r.Close()
	w.down.Toxics.ResetToxics(context.Background())
	w.up.Toxics.ResetToxics(context.Background())
	held := logContents(t, w, topic, len(acked))
	for v := range acked {
		if n := held[v]; n != 1 {
			t.Errorf("acknowledged record %s is in the log %d times", v, n)
		}
	}
	t.Logf("%d of %d acknowledged; kproxy took %v connections", len(acked), records, testutil.ToFloat64(w.m.Accepted))
	waitFor(t, 20*time.Second, "every kproxy connection closed", func() bool { return testutil.ToFloat64(w.m.Open) == 0 })
	waitGoroutinesBack(t, before, 10)
}
