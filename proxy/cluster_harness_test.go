package proxy

import (
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

// startClusterTraced is startCluster with a tracer.
func startClusterTraced(t testing.TB, brokers int, maxNode int32, kopts []kfake.Opt, tr *tracing.Tracer, opts ...envOpt) *clusterEnv {
	t.Helper()
	kc, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(brokers)}, kopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	// Node ports are a fixed range: try bases below the ephemeral range
	// until one is free.
	for try := 0; ; try++ {
		cfg := cluster.Config{NodePortBase: 20000 + rand.IntN(10000), NodeIDs: cluster.NodeIDRange{Min: 0, Max: maxNode}}
		env, err := tryProxy(t, kc.ListenAddrs()[0], cfg, tr, opts...)
		if err == nil {
			return &clusterEnv{testEnv: env, kc: kc, cfg: cfg, host: "127.0.0.1"}
		}
		if try == 20 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("cluster-mode kproxy: %v", err)
		}
	}
}

// tryProxy is a cluster-mode kproxy, or Listen's error.
func tryProxy(t testing.TB, upstream string, cfg cluster.Config, tr *tracing.Tracer, opts ...envOpt) (*testEnv, error) {
	t.Helper()
	return listenProxy(t, upstream, tr, func(s *Server) {
		if err := s.SetCluster(cfg); err != nil {
			t.Fatal(err)
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
