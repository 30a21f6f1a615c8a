package proxy

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

// TestClusterPolicyOnNodePorts: rules apply on node ports as on the
// bootstrap. A reject rule scoped to proxy.listen answers a DeleteTopics
// sent to a node port itself (the topic stays), and a topic rule refuses
// a franz-go producer's records for partitions led by every broker while
// another topic's records go through.
func TestClusterPolicyOnNodePorts(t *testing.T) {
	env := startCluster(t, 3, 7, []kfake.Opt{kfake.SeedTopics(3, "kept", "forbidden")})
	env.spread(t, "kept", 3, 3)
	env.spread(t, "forbidden", 3, 3)
	ps := applyPolicies(t, env.testEnv,
		policy.Rule{Name: "no-deletes", Action: policy.ActionReject,
			Match: policy.Selector{APIs: []string{"DeleteTopics"}, Listener: env.srv.cfg.Listen}},
		policy.Rule{Name: "no-forbidden", Action: policy.ActionReject,
			Match: policy.Selector{APIs: []string{"Produce"}, Topics: []string{"forbidden"}}})

	var reached atomic.Int32 // DeleteTopics requests that reached kfake
	env.kc.ControlKey(20, func(kmsg.Request) (kmsg.Response, error, bool) {
		env.kc.KeepControl()
		reached.Add(1)
		return nil, nil, false
	})
	for node := int32(0); node < 3; node++ {
		del := kmsg.NewPtrDeleteTopicsRequest()
		del.Version, del.TopicNames = 4, []string{"kept"}
		_, resp := clusterRoundTrip(t, dialRaw(t, env.nodeAddr(node)), del, 30+node)
		rs := resp.(*kmsg.DeleteTopicsResponse).Topics
		if len(rs) != 1 || rs[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("DeleteTopics on node %d's port was not refused by kproxy: %+v", node, rs)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d DeleteTopics reached the brokers despite the reject rule", n)
	}
	if env.kc.TopicInfo("kept") == nil {
		t.Fatal("the topic was deleted through a node port despite the reject rule")
	}
	if n := ps.count(t, "kproxy_policy_rejected_total", "no-deletes"); n != 3 {
		t.Fatalf("no-deletes refused %v requests, want 3 (one per node port)", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dials := &dialLog{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := int32(0); p < 3; p++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "kept", Partition: p, Value: valueOf(int(p))}).FirstErr(); err != nil {
			t.Fatalf("produce to kept/%d (node %d): %v", p, p, err)
		}
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "forbidden", Partition: p, Value: valueOf(int(p))}).FirstErr()
		if err == nil {
			t.Fatalf("produce to forbidden/%d (node %d) went through", p, p)
		}
	}
	for _, pi := range env.kc.PartitionInfos("forbidden") {
		if pi.HighWatermark != 0 {
			t.Fatalf("forbidden/%d holds %d records", pi.Partition, pi.HighWatermark)
		}
	}
	if n := ps.count(t, "kproxy_policy_rejected_total", "no-forbidden"); n < 3 {
		t.Fatalf("no-forbidden refused %v produces, want at least one per broker", n)
	}
	if distinct := dials.check(t, env); distinct < 4 {
		t.Fatalf("dialled %d kproxy listeners, want the bootstrap and all three node ports", distinct)
	}
}

// TestClusterSpanServerAddress: a span's server.address and server.port
// are those of the broker the request went to, the real one behind the
// node port, not kproxy's.
func TestClusterSpanServerAddress(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	env := startClusterTraced(t, 3, 7, nil, tr)
	for node := int32(0); node < 3; node++ {
		answered(t, dialRaw(t, env.nodeAddr(node)), 50+node)
	}
	answered(t, dialRaw(t, env.addr), 60)
	want := map[string]string{"60": env.kc.ListenAddrs()[0]} // the bootstrap: proxy.upstream
	for node := int32(0); node < 3; node++ {
		want[strconv.Itoa(int(50+node))] = env.realAddr(t, node)
	}
	found := 0
	for _, s := range flush() {
		a := attrMap(s)
		w, ok := want[a["kproxy.correlation_id.client"].Emit()]
		if !ok {
			continue
		}
		found++
		host, port, _ := net.SplitHostPort(w)
		if got := a["server.address"].Emit(); got != host {
			t.Errorf("span %q (client correlation id %s): server.address %q, want %q", s.Name, a["kproxy.correlation_id.client"].Emit(), got, host)
		}
		if got := a["server.port"].Emit(); got != port {
			t.Errorf("span %q (client correlation id %s): server.port %s, want %s (the broker's, not kproxy's)", s.Name, a["kproxy.correlation_id.client"].Emit(), got, port)
		}
	}
	if found != len(want) {
		t.Fatalf("found %d of the %d requests' spans", found, len(want))
	}
}
