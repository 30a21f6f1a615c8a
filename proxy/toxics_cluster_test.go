package proxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// faultCluster is a cluster-mode kproxy in front of three kfake brokers,
// each behind a toxiproxy of its own that the broker advertises: every
// connection kproxy makes to a broker crosses that broker's toxiproxy.
type faultCluster struct {
	*clusterEnv
	// via is each node's toxiproxy, by node id.
	via map[int32]*toxiproxy.Proxy
}

// advertisedListener accepts on one address and reports another (its
// toxiproxy's), which kfake then advertises in Metadata.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (a advertisedListener) Addr() net.Addr { return a.addr }

func startFaultCluster(t *testing.T, topic string, partitions int32) *faultCluster {
	t.Helper()
	quietToxics.Do(func() { zlog.Logger = zerolog.Nop() })
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	const brokers = 3
	var (
		lns     []net.Listener
		proxies []*toxiproxy.Proxy
	)
	for i := range brokers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := toxiproxy.NewProxy(srv, fmt.Sprintf("broker-%d", i), "127.0.0.1:0", ln.Addr().String())
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		lns, proxies = append(lns, ln), append(proxies, p)
	}
	var next atomic.Int32
	listen := func(string, string) (net.Listener, error) {
		i := int(next.Add(1)) - 1
		if i >= brokers {
			return nil, fmt.Errorf("kfake asked for listener %d of %d", i, brokers)
		}
		adv, err := net.ResolveTCPAddr("tcp", proxies[i].Listen)
		if err != nil {
			return nil, err
		}
		return advertisedListener{lns[i], adv}, nil
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.ListenFn(listen), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	env := startClusterProxy(t, proxies[0].Listen, 7, nil, nil, func(c *Config, f *framing.Config, _ *correlate.Config) {
		f.ReadTimeout = 5 * time.Second
		c.WriteTimeout = 5 * time.Second
		c.DialTimeout = 3 * time.Second
	})
	env.kc = kc
	fc := &faultCluster{clusterEnv: env, via: map[int32]*toxiproxy.Proxy{}}
	// kfake lists its brokers by node id, with the address each
	// advertises: its toxiproxy's.
	for node, addr := range kc.ListenAddrs() {
		for _, p := range proxies {
			if p.Listen == addr {
				fc.via[int32(node)] = p
			}
		}
	}
	if len(fc.via) != brokers {
		t.Fatalf("mapped %d of %d brokers to their toxiproxy (%v)", len(fc.via), brokers, kc.ListenAddrs())
	}
	return fc
}

// A broker that turns into a black hole (toxiproxy's timeout toxic: its
// connections stay open and nothing crosses them) while leadership moves
// off it and back, in cluster mode: the idempotent producer and the
// consumer group ride through on the other brokers, every acknowledged
// record is in the log exactly once and read, and once the clients have
// gone kproxy holds no connection and no goroutine of theirs (issue 27,
// "timeout (a black hole) on the upstream of one broker in cluster mode
// while leadership moves").
func TestClusterBlackHoleWhileLeadershipMoves(t *testing.T) {
	const topic, partitions, records = "blackhole", 6, 3000
	fc := startFaultCluster(t, topic, partitions)
	fc.spread(t, topic, partitions, 3)
	before, _ := kproxyGoroutines()
	const hole = int32(1)
	cut := nodeDisconnects{node: hole}

	prod, err := kgo.NewClient(kgo.SeedBrokers(fc.addr), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordDeliveryTimeout(90*time.Second), kgo.ProduceRequestTimeout(3*time.Second),
		kgo.RequestTimeoutOverhead(2*time.Second), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.WithHooks(&cut))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		wg    sync.WaitGroup
	)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := range records {
			v := fmt.Sprintf("v-%06d", i)
			wg.Add(1)
			prod.Produce(context.Background(), &kgo.Record{Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					mu.Lock()
					acked[string(r.Value)] = true
					mu.Unlock()
				}
			})
			time.Sleep(5 * time.Millisecond) // ~15 s of writing, across the fault
		}
		wg.Wait()
	}()

	time.Sleep(2 * time.Second)
	p := fc.via[hole]
	toxic(t, p, "hole-up", "timeout", "upstream", `{"timeout":0}`)
	toxic(t, p, "hole-down", "timeout", "downstream", `{"timeout":0}`)
	// The controller moves the black hole's partitions to the others, as
	// Kafka's does once the broker misses its heartbeats.
	time.Sleep(time.Second)
	for part := int32(0); part < partitions; part++ {
		if fc.kc.LeaderFor(topic, part) == hole {
			if err := fc.kc.MoveTopicPartition(topic, part, (hole+1+part%2)%3); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(6 * time.Second)
	untoxic(p, "hole-up")
	untoxic(p, "hole-down")
	// The broker is back: leadership returns to it.
	time.Sleep(time.Second)
	fc.spread(t, topic, partitions, 3)
	<-produced
	if len(acked) < records*9/10 {
		t.Fatalf("only %d of %d records acknowledged", len(acked), records)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(fc.addr), kgo.ConsumerGroup("g-blackhole"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for missing := len(acked); missing > 0; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the group read %d of %d acknowledged records", len(acked)-missing, len(acked))
		}
		fs.EachRecord(func(r *kgo.Record) {
			if read[string(r.Value)]++; read[string(r.Value)] == 1 && acked[string(r.Value)] {
				missing--
			}
		})
	}
	cons.Close()
	// What the log holds, through kproxy, with no fault: each
	// acknowledged record once.
	held := map[string]int{}
	all, err := kgo.NewClient(kgo.SeedBrokers(fc.addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	for total := 0; total < len(acked); {
		fs := all.PollFetches(ctx2)
		if ctx2.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { held[string(r.Value)]++; total++ })
	}
	all.Close()
	for v := range acked {
		switch n := held[v]; {
		case n == 0:
			t.Errorf("acknowledged record %s is not in the log", v)
		case n > 1:
			t.Errorf("acknowledged record %s is in the log %d times", v, n)
		}
	}
	t.Logf("%d of %d acknowledged across the black hole; the group read %d distinct; kproxy took %v connections; the producer gave up %d connections to node %d",
		len(acked), records, len(read), testutil.ToFloat64(fc.m.Accepted), cut.n.Load(), hole)
	if cut.n.Load() == 0 {
		t.Fatalf("the producer never lost its connection to node %d: the black hole was not felt", hole)
	}
	prod.Close()
	waitFor(t, 20*time.Second, "every kproxy connection closed", func() bool { return testutil.ToFloat64(fc.m.Open) == 0 })
	waitGoroutinesBack(t, before, 10)
}

// nodeDisconnects counts a franz-go client's lost connections to node.
type nodeDisconnects struct {
	node int32
	n    atomic.Int32
}

func (d *nodeDisconnects) OnBrokerDisconnect(m kgo.BrokerMetadata, _ net.Conn) {
	if m.NodeID == d.node {
		d.n.Add(1)
	}
}
