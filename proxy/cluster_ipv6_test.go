package proxy

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// TestClusterIPv6Listen: with proxy.listen on an IPv6 address, the node
// ports are bound on it and the rewritten addresses name it bare (as
// brokers advertise IPv6), so a client joins them with the port and
// dials nothing but kproxy.
func TestClusterIPv6Listen(t *testing.T) {
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Fatalf("this test needs IPv6 on loopback (::1): %v", err)
	} else {
		ln.Close()
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "v6"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	env := startClusterProxy(t, kc.ListenAddrs()[0], 3, nil, nil, func(c *Config, _ *framing.Config, _ *correlate.Config) {
		c.Listen = "[::1]:0"
	})
	env.kc = kc
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dials := &dialLog{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials), kgo.DefaultProduceTopic("v6"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 30; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: valueOf(i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if distinct := dials.check(t, env); distinct < 2 {
		t.Fatalf("dialled %d kproxy listeners, want the bootstrap and node ports", distinct)
	}
}
