package proxy

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// TestClusterNodePortBeforeDiscovery: kproxy starts while the cluster is
// down, so it knows no broker. A client that connects to a node port
// then (with its request already sent) is held, not refused, and is
// served once the cluster is up and kproxy has learnt it through the
// bootstrap; /readyz turns ready at the same time.
func TestClusterNodePortBeforeDiscovery(t *testing.T) {
	ports := freePorts(t, 3)
	bootstrap := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	env := startClusterProxy(t, bootstrap, 7, nil, nil, func(c *Config, _ *framing.Config, _ *correlate.Config) {
		c.DialTimeout = time.Minute // how long a node port holds a client for an unknown broker
	})
	waitFor(t, 30*time.Second, "a failed discovery", func() bool { return env.logs.contains("cluster discovery failed") })
	if err := env.srv.Ready(context.Background()); err == nil {
		t.Fatal("kproxy is ready with its bootstrap down")
	}
	if _, ok := env.srv.Topology().Addr(1); ok {
		t.Fatal("kproxy knows node 1 before the cluster is up")
	}
	c := dialRaw(t, env.nodeAddr(1))
	if _, err := c.Write(apiVersionsV0(5)); err != nil {
		t.Fatal(err)
	}

	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.Ports(ports...))
	if err != nil {
		t.Fatalf("kfake on ports %v: %v", ports, err)
	}
	t.Cleanup(kc.Close)
	c.SetReadDeadline(time.Now().Add(2 * time.Minute))
	f, err := readFrame(c)
	if err != nil || corrOf(f) != 5 {
		t.Fatalf("the client held on node 1's port was not served once the cluster came up: %v", err)
	}
	want := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	if got := env.realAddr(t, 1); got != want {
		t.Fatalf("node 1's port pairs with %s, want %s", got, want)
	}
	waitFor(t, 30*time.Second, "kproxy to be ready", func() bool { return env.srv.Ready(context.Background()) == nil })
}

// scriptedCounter is a scripted broker that answers ApiVersions and counts
// the requests it got.
type scriptedCounter struct {
	*fakeUpstream
	requests atomic.Int64
}

func startScriptedCounter(t testing.TB) *scriptedCounter {
	t.Helper()
	b := &scriptedCounter{}
	b.fakeUpstream = scriptedBroker(t, func(kmsg.Request) kmsg.Response {
		b.requests.Add(1)
		return nil // ApiVersions is answered by scriptedBroker
	})
	return b
}

// TestClusterBrokerRetargeted: the bootstrap names node 0 at one address,
// then at another. A Metadata relayed to a client teaches kproxy the new
// address before the client reads it: new connections to node 0's port go
// to the new broker while an open one stays with the old. When node 0
// moves again and the old address stops answering, the failed dial makes
// kproxy ask the bootstrap, and the next client reaches the new address.
func TestClusterBrokerRetargeted(t *testing.T) {
	a, b, c := startScriptedCounter(t), startScriptedCounter(t), startScriptedCounter(t)
	var node0 atomic.Value
	node0.Store(a.addr())
	bootstrap := scriptedBroker(t, func(req kmsg.Request) kmsg.Response {
		if _, ok := req.(*kmsg.MetadataRequest); ok {
			return metadataAnswer(t, map[int32]string{0: node0.Load().(string)})
		}
		return nil
	})
	env := startClusterProxy(t, bootstrap.addr(), 3, nil, nil)
	waitFor(t, 30*time.Second, "node 0 learnt through the bootstrap", func() bool {
		got, _ := env.srv.Topology().Addr(0)
		return got == a.addr()
	})
	old := dialRaw(t, env.nodeAddr(0))
	answered(t, old, 1)
	if a.requests.Load() != 1 {
		t.Fatalf("broker a got %d requests, want the client's one", a.requests.Load())
	}

	node0.Store(b.addr())
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	_, resp := clusterRoundTrip(t, dialRaw(t, env.addr), md, 2)
	bs := resp.(*kmsg.MetadataResponse).Brokers
	if len(bs) != 1 || hostPort(bs[0].Host, bs[0].Port) != env.nodeAddr(0) {
		t.Fatalf("Metadata names %v, want node 0 at %s", bs, env.nodeAddr(0))
	}
	if got := env.realAddr(t, 0); got != b.addr() {
		t.Fatalf("after the client read the Metadata naming %s, node 0's port pairs with %s", b.addr(), got)
	}
	if !env.logs.contains("broker re-targeted") {
		t.Error("no log line for the re-targeted broker")
	}
	answered(t, dialRaw(t, env.nodeAddr(0)), 3)
	if b.requests.Load() != 1 {
		t.Fatalf("broker b got %d requests, want the new client's one", b.requests.Load())
	}
	answered(t, old, 4)
	if a.requests.Load() != 2 {
		t.Fatalf("the open connection left broker a: a got %d requests, want 2", a.requests.Load())
	}

	// Node 0 moves to c and b goes away, with no client asking for
	// metadata: the first client is refused, and kproxy rediscovers.
	node0.Store(c.addr())
	b.close()
	// kproxy resets the client, which may see it while still connecting.
	if refused, err := net.DialTimeout("tcp", env.nodeAddr(0), 10*time.Second); err == nil {
		refused.Write(apiVersionsV0(5))
		expectClosed(t, refused, 30*time.Second)
		refused.Close()
	}
	waitFor(t, 30*time.Second, "node 0 re-learnt after a failed dial", func() bool {
		got, _ := env.srv.Topology().Addr(0)
		return got == c.addr()
	})
	answered(t, dialRaw(t, env.nodeAddr(0)), 6)
	if c.requests.Load() != 1 {
		t.Fatalf("broker c got %d requests, want the last client's one", c.requests.Load())
	}
}
