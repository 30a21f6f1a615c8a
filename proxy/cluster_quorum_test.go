package proxy

import (
	"errors"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// In cluster mode the KRaft quorum APIs, whose answers name controllers
// and voters kproxy does not front, are refused in the broker's place and
// left out of ApiVersions; before, DescribeQuorum v2 passed untouched and
// its Nodes' listeners reached the application (issue 27, item 9).
func TestClusterRefusesQuorumAPIs(t *testing.T) {
	env := startCluster(t, 1, 0, nil)
	c := dialRaw(t, env.addr)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	keys := offered(t, c, 1)
	if slices.Contains(keys, int16(kmsg.DescribeQuorum)) || slices.Contains(keys, int16(kmsg.Vote)) {
		t.Fatalf("cluster mode offers the quorum APIs: %v", keys)
	}
	if !slices.Contains(keys, int16(kmsg.Metadata)) || !slices.Contains(keys, int16(kmsg.DescribeGroups)) {
		t.Fatalf("cluster mode hid APIs that name no broker: %v", keys)
	}
	q := kmsg.NewPtrDescribeQuorumRequest()
	q.Version = 2
	qt := kmsg.NewDescribeQuorumRequestTopic()
	qt.Topic = "__cluster_metadata"
	qt.Partitions = append(qt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	q.Topics = append(q.Topics, qt)
	resp := ask(t, c, q, 2).(*kmsg.DescribeQuorumResponse)
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("DescribeQuorum answered error %d, want CLUSTER_AUTHORIZATION_FAILED from kproxy", resp.ErrorCode)
	}
	if len(resp.Nodes) != 0 {
		t.Fatalf("DescribeQuorum's answer names nodes %v", resp.Nodes)
	}
	answered(t, c, 3) // the connection goes on
}

// cluster.allowed_hosts bounds where kproxy dials, and so where its
// certificate and credentials go: a node port whose broker (as the
// cluster names it) is elsewhere refuses its client before any dial; the
// bootstrap, configured by the user, is served (issue 27: kproxy sent its
// credentials to whatever host an answer named).
func TestClusterAllowedHostsBoundDials(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	env := startClusterProxy(t, kc.ListenAddrs()[0], 0, nil, func(s *Server) {
		s.cluster.AllowedHosts = []string{"*.kafka.internal"}
	})
	env.kc = kc
	boot := dialRaw(t, env.addr)
	answered(t, boot, 1) // the bootstrap is dialled, and its answer learnt
	waitFor(t, 10*time.Second, "node 0 learnt", func() bool { _, ok := env.srv.Topology().Addr(0); return ok })
	// kproxy resets the client at once: on a loaded machine the reset
	// can come before the dial has returned.
	if c, err := net.DialTimeout("tcp", env.nodeAddr(0), 5*time.Second); err == nil {
		defer c.Close()
		c.Write(apiVersionsV0(2))
		expectNothing(t, c, "a node port whose broker is not in allowed_hosts")
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the refusal counted", func() bool {
		return testutil.ToFloat64(env.m.Refused.WithLabelValues("host_not_allowed")) == 1
	})
	if !env.logs.contains("not in cluster.allowed_hosts") {
		t.Fatalf("no log line names allowed_hosts:\n%s", env.logs)
	}
}

// Clients of the port of a node that does not exist are refused as soon
// as a discovery begun after they came has not found it, not after the
// whole dial_timeout, and at most a few wait at once; a bootstrap client
// meanwhile is served (issue 27, item 8: 100 such clients were each held
// 5.0 s, and a bootstrap client was reset).
func TestClusterUnknownNodeClientsRefusedFast(t *testing.T) {
	env := startCluster(t, 1, 3, nil, func(c *Config, _ *framing.Config, _ *correlate.Config) {
		c.DialTimeout = 20 * time.Second // what they waited before
	})
	boot := dialRaw(t, env.addr)
	answered(t, boot, 1)
	start := time.Now()
	const clients = 100
	done := make(chan time.Duration, clients)
	for range clients {
		go func() {
			c, err := net.DialTimeout("tcp", env.nodeAddr(3), 5*time.Second)
			if err != nil {
				done <- 0
				return
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			c.Read(make([]byte, 1)) // until kproxy refuses it
			done <- time.Since(start)
		}()
	}
	answered(t, boot, 2) // the bootstrap client is served meanwhile
	var slowest time.Duration
	for range clients {
		slowest = max(slowest, <-done)
	}
	if slowest > 10*time.Second {
		t.Fatalf("the last client of a node that does not exist was refused after %v (dial_timeout 20s)", slowest)
	}
	if got := env.refused("unknown_node"); got != clients {
		t.Fatalf("%v refusals counted, want %d", got, clients)
	}
	answered(t, boot, 3)
}
