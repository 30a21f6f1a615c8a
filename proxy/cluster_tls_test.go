package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterTLS: cluster mode with TLS on both sides, and with mutual
// TLS on both: kproxy discovers the brokers over TLS, a franz-go client
// bootstraps over TLS, round-trips records through partitions led by
// every broker, and dials only kproxy's listeners; kproxy's TLS
// handshakes with the brokers are counted.
func TestClusterTLS(t *testing.T) {
	for _, sides := range []tlsSides{
		{client: true, upstream: true},
		{client: true, mutual: true, upstream: true, upstreamMutual: true},
	} {
		t.Run(sides.String(), func(t *testing.T) {
			const topic, partitions, n = "tls-spread", 6, 600
			w, broker := newTLSWorld(t, sides, nil)
			kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.TLS(broker), kfake.SeedTopics(partitions, topic))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(kc.Close)
			env := startClusterProxy(t, kc.ListenAddrs()[0], 7, nil, func(s *Server) { s.SetTLS(w.store, w.metrics) })
			env.kc = kc
			waitFor(t, 30*time.Second, "a discovery over TLS", func() bool {
				return testutil.ToFloat64(env.m.Discoveries.WithLabelValues("ok")) >= 1
			})
			env.spread(t, topic, partitions, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dials := &dialLog{}
			opts := []kgo.Opt{kgo.SeedBrokers(env.addr), kgo.WithHooks(dials), kgo.DialTLSConfig(w.clientTLS(t, sides, "app"))}
			prod, err := kgo.NewClient(append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer prod.Close()
			produceDuring(ctx, t, prod, topic, 0, n, n, nil)
			for _, pi := range kc.PartitionInfos(topic) {
				if pi.HighWatermark == 0 {
					t.Fatalf("partition %d (node %d) got no record", pi.Partition, pi.Leader)
				}
			}
			cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			consume(ctx, cons, n).wait(t, n).verify(t, n)
			if distinct := dials.check(t, env); distinct < 4 {
				t.Fatalf("dialled %d kproxy listeners, want the bootstrap and all three node ports", distinct)
			}
			// A discovery, and a pair with each broker at least.
			if got := w.handshakes("upstream", "ok"); got < 4 {
				t.Fatalf("%v TLS handshakes with the brokers, want at least 4", got)
			}
			if got := w.handshakes("client", "ok"); got < 4 {
				t.Fatalf("%v TLS handshakes with clients, want at least 4", got)
			}
		})
	}
}
