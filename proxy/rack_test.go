package proxy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/telemetry"
)

// fetchRacks counts the rack_id of every Fetch request (v11+) the broker
// reads. A Fetch does not say which client sent it: a test runs one
// consumer at a time, and resets the counts between them.
type fetchRacks struct {
	mu    sync.Mutex
	racks map[string]int // rack -> fetches
}

// watch has kfake report every Fetch to r and then answer it as usual.
func (r *fetchRacks) watch(c *kfake.Cluster) {
	r.reset()
	c.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if f := req.(*kmsg.FetchRequest); f.Version >= 11 {
			r.mu.Lock()
			r.racks[f.Rack]++
			r.mu.Unlock()
		}
		return nil, nil, false
	})
}

func (r *fetchRacks) reset() {
	r.mu.Lock()
	r.racks = map[string]int{}
	r.mu.Unlock()
}

// seen returns the counts so far.
func (r *fetchRacks) seen() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.racks {
		out[k] = v
	}
	return out
}

// onlyRack fails t unless every Fetch the broker read since the last
// reset carried rack, and returns how many there were.
func (r *fetchRacks) onlyRack(t *testing.T, who, rack string) int {
	t.Helper()
	got := r.seen()
	if len(got) != 1 || got[rack] == 0 {
		t.Fatalf("%s: the broker read Fetch requests with racks %v, want only %q", who, got, rack)
	}
	return got[rack]
}

func withClientRack(rack string) envOpt {
	return func(c *Config, _ *framing.Config, _ *correlate.Config) { c.ClientRack = rack }
}

// rackRoundTrip produces n records to topic and reads them back with a
// franz-go consumer with opts, through env.
func rackRoundTrip(t *testing.T, env *testEnv, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	produceOneByOne(t, env, topic, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(env.addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	l := newLedger()
	for len(l.seen) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(l.seen), n, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { l.add(r.Key, r.Value) })
	}
	l.verify(t, n)
}

// TestClientRackFilled: with proxy.client_rack set, a franz-go consumer
// that sets no rack fetches with kproxy's, reads every record, and the
// fill is counted; a consumer with its own rack keeps it; without the
// setting the broker sees the empty rack the client sent.
func TestClientRackFilled(t *testing.T) {
	var racks fetchRacks
	env := startKfakeWith(t, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "zoned", "zoned-own")}, nil, racks.watch, withClientRack("zone-a"))
	rackRoundTrip(t, env, "zoned", 50)
	fetches := racks.onlyRack(t, "no rack", "zone-a")
	if filled := testutil.ToFloat64(env.m.Relay.RackFilled); filled < float64(fetches) {
		t.Fatalf("kproxy_fetch_rack_filled_total %v, below the %v fetches the broker read with kproxy's rack", filled, fetches)
	}
	racks.reset()
	rackRoundTrip(t, env, "zoned-own", 50, kgo.Rack("zone-b"))
	racks.onlyRack(t, "own rack", "zone-b")

	var plain fetchRacks
	off := startKfakeWith(t, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "zoned")}, nil, plain.watch)
	rackRoundTrip(t, off, "zoned", 10)
	plain.onlyRack(t, "no client_rack", "")
	if n := testutil.ToFloat64(off.m.Relay.RackFilled); n != 0 {
		t.Fatalf("kproxy_fetch_rack_filled_total %v with no client_rack", n)
	}
}

// TestClientRackSarama: sarama's consumer (Fetch v11+ from Kafka 2.4's
// protocol) with no RackID gets kproxy's rack and reads every record;
// one with its own RackID keeps it.
func TestClientRackSarama(t *testing.T) {
	var racks fetchRacks
	env := startKfakeWith(t, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "zoned")}, nil, racks.watch, withClientRack("zone-a"))
	for _, own := range []string{"", "zone-b"} {
		racks.reset()
		d := &viaDialer{want: env.addr}
		cfg := saramaConfig(d)
		cfg.ClientID = "sarama-rack" + own
		cfg.RackID = own
		cfg.Producer.Return.Successes = true
		cl := saramaNewClient(t, env, cfg)
		prod, err := sarama.NewSyncProducerFromClient(cl)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "zoned", Key: sarama.ByteEncoder(keyOf(i)),
				Value: sarama.StringEncoder(fmt.Sprintf("%s-%d", own, i))}); err != nil {
				t.Fatalf("sarama produce: %v", err)
			}
		}
		prod.Close()
		cons, err := sarama.NewConsumerFromClient(cl)
		if err != nil {
			t.Fatal(err)
		}
		pc, err := cons.ConsumePartition("zoned", 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		timeout := time.After(30 * time.Second)
		for seen < 20 {
			select {
			case m := <-pc.Messages():
				if string(m.Value) == fmt.Sprintf("%s-%d", own, seen) {
					seen++
				}
			case err := <-pc.Errors():
				t.Fatalf("sarama consume: %v", err)
			case <-timeout:
				t.Fatalf("sarama read %d of 20 records", seen)
			}
		}
		pc.Close()
		cons.Close()
		want := own
		if own == "" {
			want = "zone-a"
		}
		racks.onlyRack(t, "sarama with rack "+own, want)
		d.check(t)
	}
}

// TestClientRackTLS: the TLS driver fills the rack the same way.
func TestClientRackTLS(t *testing.T) {
	sides := tlsSides{client: true}
	var racks fetchRacks
	w := startTLSKfake(t, sides, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "zoned")}, nil, withClientRack("zone-a"))
	racks.watch(w.cluster)
	racks.reset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.addr), kgo.DialTLSConfig(w.clientTLS(t, sides, "")),
		kgo.DefaultProduceTopic("zoned"), kgo.ConsumeTopics("zoned"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: keyOf(i), Value: valueOf(i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	l := newLedger()
	for len(l.seen) < 10 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of 10 records: %v", len(l.seen), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { l.add(r.Key, r.Value) })
	}
	l.verify(t, 10)
	racks.onlyRack(t, "TLS", "zone-a")
}

// TestClientRackWithLag: with telemetry.lag on too, the Fetch is walked
// once, by the lag table, and the fill uses that walk: the broker still
// reads kproxy's rack, and the consumer's lag is measured.
func TestClientRackWithLag(t *testing.T) {
	var racks fetchRacks
	lag := telemetry.NewLag(telemetry.LagConfig{Enabled: true, MaxSeries: 10})
	reg := prometheus.NewRegistry()
	lag.Register(reg)
	env := startKfakeWith(t, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "zoned")},
		func(s *Server) { s.SetLag(lag) }, racks.watch, withClientRack("zone-a"))
	rackRoundTrip(t, env, "zoned", 20, kgo.ClientID("zoned-consumer"))
	racks.onlyRack(t, "no rack, lag on", "zone-a")
	waitFor(t, 10*time.Second, "zoned-consumer's lag series", func() bool {
		_, _, ok := lagOf(t, reg, "zoned-consumer", "", "zoned", "0")
		return ok
	})
}
