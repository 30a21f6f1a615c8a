package e2e

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// The rack column (zone-aware fetching, KIP-392). The three-node cluster
// has one rack per node and the rack-aware replica selector. Each cell
// makes a topic whose one partition node 1 leads, with a replica on
// every node, produces to it and consumes it with a group, with a client
// that sets no rack of its own, twice:
//
//   - kproxy-no-rack: through a cluster-mode kproxy without
//     proxy.client_rack, the control: every record is fetched from the
//     leader;
//   - kproxy-rack: through one with proxy.client_rack set to node 3's
//     rack: every record is fetched from node 3, the follower in the
//     client's rack.
//
// Where each record came from is read from the kproxies' Fetch spans in
// Jaeger: each names its broker (server.address, server.port) and counts
// the records it returned (tracing.links.fetch).

const (
	rackRecords     = 300
	rackOffService  = "kproxy-rack-off"
	rackOnService   = "kproxy-rack-on"
	rackSpanWait    = 60 * time.Second
	rackLeader      = int32(1)
	rackClientsNode = int32(3) // the node in the rack kproxy gives clients
)

// rackReplicas are the cell topic's replicas, its leader first.
var rackReplicas = []int32{rackLeader, 2, rackClientsNode}

var rackPaths = []path{{name: "kproxy-no-rack", proxied: true}, {name: "kproxy-rack", proxied: true}}

// rackFixture is the column's two cluster-mode kproxies in front of the
// three-node cluster, tracing to Jaeger.
type rackFixture struct {
	jaeger  *harness.Jaeger
	off, on *harness.ClusterKproxy
}

func startRackFixture(t *testing.T, k *harness.KafkaCluster, j *harness.Jaeger) *rackFixture {
	t.Helper()
	tracing := func(service string) string {
		return fmt.Sprintf("tracing:\n  enabled: true\n  endpoint: http://%s\n  protocol: grpc\n  service_name: %s\n  sample_ratio: 1\n  links:\n    fetch: true\n",
			j.OTLPGRPC, service)
	}
	return &rackFixture{
		jaeger: j,
		off:    harness.StartClusterKproxyWith(t, rackOffService, k, tracing(rackOffService)),
		on: harness.StartClusterKproxyWith(t, rackOnService, k,
			"proxy:\n  client_rack: "+harness.Rack(rackClientsNode)+"\n"+tracing(rackOnService)),
	}
}

// of is the kproxy of path p, with its service name and the node every
// record must be fetched from.
func (f *rackFixture) of(p path) (*harness.ClusterKproxy, string, int32) {
	if p.name == "kproxy-rack" {
		return f.on, rackOnService, rackClientsNode
	}
	return f.off, rackOffService, rackLeader
}

func (f *rackFixture) kproxies() []*harness.Kproxy {
	if f == nil {
		return nil
	}
	return []*harness.Kproxy{f.off.Kproxy, f.on.Kproxy}
}

// rackCell is the column's cell (see the column's comment).
func (c *cell) rackCell() error {
	start := time.Now()
	k := c.env.cluster.kafka
	k.CreateTopicOn(c.t, c.topic, rackReplicas)
	kp, service, from := c.env.rack.of(c.path)
	want := records(c.topic, rackRecords)
	ctx, cancel := c.ctx()
	defer cancel()
	conn := kclients.Conn{Bootstrap: kp.Addr}
	if err := c.driver.Produce(ctx, kclients.ProduceOpts{Conn: conn, Topic: c.topic, Acks: "all", Compression: "none"}, want); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	got, err := c.driver.Consume(ctx, kclients.ConsumeOpts{Conn: conn, Topic: c.topic, Group: c.topic,
		Count: len(want), Timeout: compatTimeout, Protocol: "classic", Members: 1})
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	sum, err := check(want, got, true, nil)
	if err != nil {
		return err
	}
	wantAddr := k.Node(from).Addr
	lookback := time.Since(start) + time.Minute
	var byBroker map[string]int
	deadline := time.Now().Add(rackSpanWait)
	for {
		byBroker, err = fetchedFrom(c, service, lookback)
		others := 0
		for addr, n := range byBroker {
			if addr != wantAddr {
				others += n
			}
		}
		switch {
		case err == nil && byBroker[wantAddr] >= len(want) && others == 0:
			c.t.Logf("%s: %d records, digest %s, fetched from node %d (%s) by kproxy's Fetch spans: %v",
				c.path.name, len(want), sum, from, wantAddr, byBroker)
			return nil
		case err == nil && others > 0:
			return fmt.Errorf("records fetched by broker %v, want all of them from node %d (%s)", byBroker, from, wantAddr)
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("querying jaeger: %w", err)
			}
			return fmt.Errorf("after %v, %s's Fetch spans in Jaeger returned records by broker %v, want %d from node %d (%s)",
				rackSpanWait, service, byBroker, len(want), from, wantAddr)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// fetchedFrom sums the records service's Fetch spans of the cell's topic
// returned, by the broker's address they name.
func fetchedFrom(c *cell, service string, lookback time.Duration) (map[string]int, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	spans, err := c.env.rack.jaeger.SpansV3(ctx, service, "Fetch "+c.topic, lookback)
	if err != nil {
		return nil, err
	}
	by := map[string]int{}
	for _, s := range spans {
		n, _ := strconv.Atoi(s.Attr("messaging.batch.message_count"))
		if n > 0 {
			by[net.JoinHostPort(s.Attr("server.address"), s.Attr("server.port"))] += n
		}
	}
	return by, nil
}
