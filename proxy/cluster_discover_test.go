package proxy

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// scriptedBootstrap is a broker that answers kproxy's discovery
// (ApiVersions, then Metadata v8) with the brokers brokers() names, and
// counts the Metadata requests it gets. A client's Metadata (one that is
// not kproxy's own) gets clientBody instead, when it is set.
type scriptedBootstrap struct {
	*fakeUpstream
	metadata   atomic.Int64
	clientBody atomic.Pointer[[]byte]
}

func startScriptedBootstrap(t testing.TB, brokers func() []kmsg.MetadataResponseBroker) *scriptedBootstrap {
	t.Helper()
	b := &scriptedBootstrap{}
	b.fakeUpstream = startFakeUpstream(t, func(c net.Conn, frame []byte) {
		key, version := int16(binary.BigEndian.Uint16(frame[4:])), int16(binary.BigEndian.Uint16(frame[6:]))
		var resp kmsg.Response
		switch key {
		case framing.KeyApiVersions:
			r := kmsg.NewPtrApiVersionsResponse()
			r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MinVersion: 0, MaxVersion: 8}, {ApiKey: 18, MinVersion: 0, MaxVersion: 3}}
			resp = r
		case framing.KeyMetadata:
			if body := b.clientBody.Load(); body != nil && !strings.Contains(string(frame), "kproxy") {
				echoResponse(c, frame, *body)
				return
			}
			b.metadata.Add(1)
			r := kmsg.NewPtrMetadataResponse()
			r.Brokers = brokers()
			resp = r
		default:
			c.Close()
			return
		}
		resp.SetVersion(version)
		echoResponse(c, frame, resp.AppendTo(nil))
	})
	return b
}

// deadAddr is an address nothing listens on.
func deadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// knock connects to addr and waits for kproxy to close the connection
// (a reset may come before the connect returns).
func knock(t testing.TB, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	expectClosed(t, c, 20*time.Second)
}

// startClusterAt is a cluster-mode kproxy serving node ids 0..maxNode in
// front of the bootstrap at upstream, with discoverGap between two
// discoveries.
func startClusterAt(t testing.TB, upstream string, maxNode int32, gap time.Duration, opts ...envOpt) *clusterEnv {
	t.Helper()
	return startClusterProxy(t, upstream, maxNode, nil, func(s *Server) { s.discoverGap = gap }, opts...)
}

// TestClusterRediscoverOnePerWait: clients that cannot be served on a
// node port ask for a discovery through the bootstrap, but however many
// ask, kproxy runs at most one discovery per gap (and per backoff when the
// bootstrap does not answer). Each client used to start one at once: a
// broker that is down, or a bootstrap that is, turned every reconnecting
// client into a discovery (and a warning in the log).
func TestClusterRediscoverOnePerWait(t *testing.T) {
	const clients = 15
	t.Run("broker down", func(t *testing.T) {
		dead := deadAddr(t)
		host, port, _ := net.SplitHostPort(dead)
		p, _ := strconv.Atoi(port)
		boot := startScriptedBootstrap(t, func() []kmsg.MetadataResponseBroker {
			return []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
		})
		env := startClusterAt(t, boot.addr(), 0, time.Hour)
		waitFor(t, 20*time.Second, "the first discovery", func() bool {
			_, ok := env.srv.Topology().Addr(0)
			return ok
		})
		for i := 0; i < clients; i++ {
			knock(t, env.nodeAddr(0))
		}
		waitFor(t, 20*time.Second, "the dial failures counted", func() bool {
			return testutil.ToFloat64(env.m.DialFailures) >= clients
		})
		if n := boot.metadata.Load(); n != 1 {
			t.Fatalf("the bootstrap got %d discoveries for %d clients of a broker that is down, want 1 (the first; the rest wait for the gap)", n, clients)
		}
	})
	t.Run("bootstrap down", func(t *testing.T) {
		env := startClusterAt(t, deadAddr(t), 0, time.Hour, func(c *Config, _ *framing.Config, _ *correlate.Config) {
			c.DialTimeout = 50 * time.Millisecond
		})
		failed := func() float64 { return testutil.ToFloat64(env.m.Discoveries.WithLabelValues("error")) }
		waitFor(t, 20*time.Second, "the first discovery to fail", func() bool { return failed() >= 1 })
		for i := 0; i < clients; i++ {
			knock(t, env.nodeAddr(0))
		}
		waitFor(t, 20*time.Second, "the clients refused", func() bool {
			return testutil.ToFloat64(env.m.Refused.WithLabelValues("unknown_node")) >= clients
		})
		if n := failed(); n != 1 {
			t.Fatalf("%v discoveries tried for %d clients while the bootstrap is down, want 1 (the rest wait for the backoff)", n, clients)
		}
	})
}

// TestClusterBrokerOutsideNodeIDs: a cluster with a broker outside
// node_ids cannot be served (every Metadata response names it, and is not
// passed on), so kproxy is not ready, and says which node and what to
// change. It used to learn the others, log nothing and report ready while
// every client's connection was closed.
func TestClusterBrokerOutsideNodeIDs(t *testing.T) {
	env := startCluster(t, 3, 1, nil) // node ids 0-2, served 0-1
	waitFor(t, 20*time.Second, "a discovery", func() bool {
		return testutil.ToFloat64(env.m.Discoveries.WithLabelValues("ok"))+testutil.ToFloat64(env.m.Discoveries.WithLabelValues("error")) >= 1
	})
	err := env.srv.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), "outside cluster.node_ids 0-1: node 2 (") {
		t.Fatalf("Ready: %v, want the broker outside node_ids named", err)
	}
	// The warning is written just after the outcome is recorded.
	waitFor(t, 20*time.Second, "a log line naming node 2", func() bool { return strings.Contains(env.logs.String(), "node 2 (") })
}

// TestClusterDrainBeforeServe: a drain that comes before Serve (a SIGTERM
// as kproxy starts) closes every port, and Serve then returns at once.
// netpoll's Shutdown does nothing before its Serve has begun, so the
// ports used to stay bound, and Serve served them after the drain.
func TestClusterDrainBeforeServe(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	var srv *Server
	var cfg cluster.Config
	for try := 0; srv == nil; try++ {
		cfg = cluster.Config{NodePortBase: 20000 + rand.IntN(10000), NodeIDs: cluster.NodeIDRange{Min: 0, Max: 3}}
		c := Defaults()
		c.Listen, c.Upstream = "127.0.0.1:0", kc.ListenAddrs()[0]
		s, err := New(c, framing.Defaults(), correlate.Defaults(), zerolog.Nop(), NewMetrics(prometheus.NewRegistry()), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetCluster(cfg); err != nil {
			t.Fatal(err)
		}
		switch err := s.Listen(); {
		case err == nil:
			srv = s
		case try == 20 || !strings.Contains(err.Error(), "address already in use"):
			t.Fatal(err)
		}
	}
	boot := srv.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after the drain: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve after the drain did not return: it is serving")
	}
	for _, addr := range []string{boot, net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.NodePortBase+3))} {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after the drain", addr)
		}
	}
}

// TestClusterUnreadableResponseReason: a Metadata response kproxy cannot
// parse is not passed on, and the closing log line says that, not that
// a broker was outside node_ids (which it used to say, with node_ids
// appended to the parse error).
func TestClusterUnreadableResponseReason(t *testing.T) {
	var boot *scriptedBootstrap
	boot = startScriptedBootstrap(t, func() []kmsg.MetadataResponseBroker {
		host, port, _ := net.SplitHostPort(boot.addr())
		p, _ := strconv.Atoi(port)
		return []kmsg.MetadataResponseBroker{{NodeID: 0, Host: host, Port: int32(p)}}
	})
	cut := []byte{0, 0, 0, 1} // a broker array cut short
	boot.clientBody.Store(&cut)
	env := startClusterAt(t, boot.addr(), 0, time.Hour)
	c := dialRaw(t, env.addr)
	defer c.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 8
	if _, err := c.Write(encodeRequest(req, 7)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c, 20*time.Second)
	waitFor(t, 20*time.Second, "the connection's closing line", func() bool {
		return strings.Contains(env.logs.String(), `"message":"connection closed"`)
	})
	logs := env.logs.String()
	if !strings.Contains(logs, "kproxy cannot read") || strings.Contains(logs, "cannot front") || strings.Contains(logs, "node_ids") {
		t.Fatalf("the closing line does not say the response could not be read:\n%s", logs)
	}
}
