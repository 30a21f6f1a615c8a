package proxy

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/tracing"
)

// clusterEnv is a cluster-mode kproxy in front of a multi-broker kfake,
// which advertises its own addresses: every address a client sees has
// been rewritten by kproxy.
type clusterEnv struct {
	*testEnv
	kc   *kfake.Cluster
	cfg  cluster.Config
	host string
}

// nodeAddr is kproxy's port for node.
func (e *clusterEnv) nodeAddr(node int32) string {
	port, ok := e.cfg.Port(node)
	if !ok {
		panic("node outside the test's node ids")
	}
	return net.JoinHostPort(e.host, strconv.Itoa(port))
}

// ours reports whether addr is one of kproxy's listeners.
func (e *clusterEnv) ours(addr string) bool {
	if addr == e.addr {
		return true
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != e.host {
		return false
	}
	p, _ := strconv.Atoi(port)
	return e.cfg.Serves(p)
}

// startCluster runs kfake with brokers brokers (node ids 0..brokers-1)
// and a cluster-mode kproxy serving node ids 0..maxNode in front of it.
func startCluster(t testing.TB, brokers int, maxNode int32, kopts []kfake.Opt, opts ...envOpt) *clusterEnv {
	return startClusterTraced(t, brokers, maxNode, kopts, nil, opts...)
}

// startSpread is startCluster with three brokers, node ids 0-7 served,
// and topic's partitions led by every broker in turn.
func startSpread(t testing.TB, topic string, partitions int32) *clusterEnv {
	t.Helper()
	env := startCluster(t, 3, 7, []kfake.Opt{kfake.SeedTopics(partitions, topic)})
	env.spread(t, topic, partitions, 3)
	return env
}

// startClusterTraced is startCluster with a tracer.
func startClusterTraced(t testing.TB, brokers int, maxNode int32, kopts []kfake.Opt, tr *tracing.Tracer, opts ...envOpt) *clusterEnv {
	t.Helper()
	kc, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(brokers)}, kopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	env := startClusterProxy(t, kc.ListenAddrs()[0], maxNode, tr, nil, opts...)
	env.kc = kc
	return env
}

// startClusterProxy is a cluster-mode kproxy serving node ids 0..maxNode
// in front of upstream (the cluster's bootstrap, which may be a scripted
// broker or not listening yet), with setup run before it listens (SetTLS).
func startClusterProxy(t testing.TB, upstream string, maxNode int32, tr *tracing.Tracer, setup func(*Server), opts ...envOpt) *clusterEnv {
	t.Helper()
	// Node ports are a fixed range: try bases below the ephemeral range
	// until one is free.
	for try := 0; ; try++ {
		cfg := cluster.Config{NodePortBase: 20000 + rand.IntN(10000), NodeIDs: cluster.NodeIDRange{Min: 0, Max: maxNode}}
		env, err := tryProxy(t, upstream, cfg, tr, setup, opts...)
		if err == nil {
			host, _, _ := net.SplitHostPort(env.addr)
			return &clusterEnv{testEnv: env, cfg: cfg, host: host}
		}
		if try == 20 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("cluster-mode kproxy: %v", err)
		}
	}
}

// tryProxy is a cluster-mode kproxy, or Listen's error.
func tryProxy(t testing.TB, upstream string, cfg cluster.Config, tr *tracing.Tracer, setup func(*Server), opts ...envOpt) (*testEnv, error) {
	t.Helper()
	return listenProxy(t, upstream, tr, func(s *Server) {
		if err := s.SetCluster(cfg); err != nil {
			t.Fatal(err)
		}
		if setup != nil {
			setup(s)
		}
	}, opts...)
}

// dialLog records every address a franz-go client dials.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dialLog) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, c net.Conn, err error) {
	if err != nil || c == nil {
		return
	}
	d.mu.Lock()
	d.addrs = append(d.addrs, c.RemoteAddr().String())
	d.mu.Unlock()
}

// check fails the test for any address that is not kproxy's, and returns
// how many distinct addresses were dialled.
func (d *dialLog) check(t testing.TB, e *clusterEnv) int {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	for _, a := range d.addrs {
		if !e.ours(a) {
			t.Fatalf("client dialled %s, not a kproxy listener (all: %v)", a, d.addrs)
		}
		seen[a] = true
	}
	return len(seen)
}

// addrDialer dials TCP for sarama (Net.Proxy.Dialer) and kafka-go
// (Dialer.DialFunc, Transport.Dial), recording every address it is asked
// for, so that a test can prove a client dialled only kproxy's listeners.
type addrDialer struct {
	mu    sync.Mutex
	addrs []string
}

// DialContext records addr and dials it.
func (d *addrDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	nd := net.Dialer{Timeout: 10 * time.Second}
	return nd.DialContext(ctx, network, addr)
}

// Dial is DialContext without a context, as sarama's proxy dialer wants.
func (d *addrDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

// check fails the test for any address that is not kproxy's, and returns
// the distinct addresses dialled.
func (d *addrDialer) check(t testing.TB, e *clusterEnv) map[string]bool {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.addrs) == 0 {
		t.Fatal("client never dialled through the recording dialer")
	}
	seen := map[string]bool{}
	for _, a := range d.addrs {
		if !e.ours(a) {
			t.Fatalf("client dialled %s, not a kproxy listener (all: %v)", a, d.addrs)
		}
		seen[a] = true
	}
	return seen
}

// spread makes every partition p of topic led by node p%brokers, so that
// a test's records go through every broker's node port.
func (e *clusterEnv) spread(t testing.TB, topic string, partitions int32, brokers int) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		if err := e.kc.MoveTopicPartition(topic, p, p%int32(brokers)); err != nil {
			t.Fatalf("move %s/%d to node %d: %v", topic, p, p%int32(brokers), err)
		}
	}
}

// realAddr is the address kproxy learnt for node, failing the test when
// it learns none within 10s.
func (e *clusterEnv) realAddr(t testing.TB, node int32) string {
	t.Helper()
	// discovery runs beside the clients, so the node may be learnt a
	// moment after the response that named it was relayed
	deadline := time.Now().Add(10 * time.Second)
	for {
		if a, ok := e.srv.Topology().Addr(node); ok {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("kproxy knows no address for node %d after 10s", node)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
