package proxy

import (
	"context"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/cluster"
)

// TestClusterTLSBothSides: with TLS from the client and to the brokers,
// every node port is served by the stream driver; a client bootstrapping
// through kproxy produces and consumes, dialling only kproxy, and a drain
// stops every port.
func TestClusterTLSBothSides(t *testing.T) {
	sides := tlsSides{client: true, upstream: true}
	w, broker := newTLSWorld(t, sides, nil)
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.TLS(broker), kfake.SeedTopics(3, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	var env *clusterEnv
	for try := 0; env == nil; try++ {
		cfg := cluster.Config{NodePortBase: 20000 + rand.IntN(10000), NodeIDs: cluster.NodeIDRange{Min: 0, Max: 3}}
		te, err := listenProxy(t, kc.ListenAddrs()[0], nil, func(s *Server) {
			s.SetTLS(w.store, w.metrics)
			if err := s.SetCluster(cfg); err != nil {
				t.Fatal(err)
			}
		})
		switch {
		case err == nil:
			env = &clusterEnv{testEnv: te, kc: kc, cfg: cfg, host: "127.0.0.1"}
		case try == 20 || !strings.Contains(err.Error(), "address already in use"):
			t.Fatalf("cluster-mode kproxy: %v", err)
		}
	}
	waitFor(t, 20*time.Second, "ready (the topology learnt over TLS)", func() bool {
		return env.srv.Ready(context.Background()) == nil && env.srv.Topology().Nodes() == 3
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dials := &dialLog{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials), kgo.DialTLSConfig(w.clientTLS(t, sides, "")),
		kgo.DefaultProduceTopic("tls"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ConsumeTopics("tls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 30
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: valueOf(i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		got += fs.NumRecords()
	}
	if distinct := dials.check(t, env); distinct < 2 {
		t.Fatalf("dialled %d kproxy listeners, want the bootstrap and node ports", distinct)
	}
	cl.Close()
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	if err := env.srv.Drain(dctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	for node := int32(0); node <= 3; node++ {
		if c, err := net.Dial("tcp", env.nodeAddr(node)); err == nil {
			c.Close()
			t.Errorf("node %d's port still accepts after the drain", node)
		}
	}
}
