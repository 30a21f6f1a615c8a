package e2e

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/kproxy/kproxy/e2e/harness"
)

// The cluster column. Each cell runs a produce/consume round trip against
// a three-node KRaft cluster whose brokers advertise their own addresses
// (managed Kafka: the brokers' configuration is not the user's), on a
// topic with partitions led by every broker, twice:
//
//   - direct: the client bootstraps from one broker (the control);
//   - kproxy: the client bootstraps from a kproxy in cluster mode (the
//     client-pod sidecar), which must rewrite every broker address the
//     client sees to one of its own listeners.
//
// While the client runs, a watch reads from /proc the TCP connections of
// the test process and every process it started (the client drivers, and
// what they start), apart from the brokers and kproxy themselves: through
// kproxy none may reach a broker's real port and some must reach
// kproxy's; direct, some must reach a broker's (the watch's own control).

// clusterParts is the cluster topic's partition count: two led by each
// node (Kafka spreads leaders round robin; the cell checks it).
const clusterParts = 6

// clusterFixture is the cluster and its cluster-mode kproxy, started with
// the newest broker's environment and shared by its cluster cells.
type clusterFixture struct {
	kafka  *harness.KafkaCluster
	kproxy *harness.ClusterKproxy
}

func startClusterFixture(t *testing.T, version string) *clusterFixture {
	k := harness.StartKafkaCluster(t, version)
	return &clusterFixture{kafka: k, kproxy: harness.StartClusterKproxy(t, "kproxy-cluster", k)}
}

// bootstrap is where a cluster cell's client bootstraps on path p.
func (f *clusterFixture) bootstrap(p path) string {
	if p.proxied {
		return f.kproxy.Addr
	}
	return f.kafka.Nodes[0].Addr
}

// watchInterval is how often a socket watch samples /proc.
const watchInterval = 50 * time.Millisecond

// socketWatch samples, until stopped, the client processes' connections
// to the brokers' real ports and to kproxy's ports.
type socketWatch struct {
	stopc chan struct{}
	done  chan struct{}

	// Results, read once done is closed.
	toBrokers map[string]harness.TreeConnection // distinct, by String
	toKproxy  int                               // samples that saw one to kproxy
	samples   int
	err       error
}

// watch starts a socket watch of this process's tree, leaving out the
// cluster's nodes and kproxy (they talk to the brokers by design).
func (f *clusterFixture) watch() *socketWatch {
	w := &socketWatch{stopc: make(chan struct{}), done: make(chan struct{}), toBrokers: map[string]harness.TreeConnection{}}
	brokers, kproxy := f.kafka.BrokerAddrs(), f.kproxy.Addrs()
	skip := append(f.kafka.Pids(), f.kproxy.Pid())
	remotes := append(slices.Clone(brokers), kproxy...)
	go func() {
		defer close(w.done)
		tick := time.NewTicker(watchInterval)
		defer tick.Stop()
		for {
			conns, err := harness.EstablishedFromTree(os.Getpid(), skip, remotes)
			if err != nil {
				w.err = err
				return
			}
			w.samples++
			sawKproxy := false
			for _, c := range conns {
				if slices.Contains(kproxy, c.Remote.String()) {
					sawKproxy = true
				} else {
					w.toBrokers[c.String()] = c
				}
			}
			if sawKproxy {
				w.toKproxy++
			}
			select {
			case <-w.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// stop ends the watch and waits for its sampler.
func (w *socketWatch) stop() {
	close(w.stopc)
	<-w.done
}

// check says what is wrong with what the watch saw on path p.
func (w *socketWatch) check(p path) error {
	if w.err != nil {
		return fmt.Errorf("%s: reading the clients' sockets from /proc: %w", p.name, w.err)
	}
	seen := slices.Sorted(maps.Keys(w.toBrokers))
	switch {
	case p.proxied && len(seen) > 0:
		return fmt.Errorf("%s: the client held connections to real broker ports, bypassing kproxy: %v", p.name, seen)
	case p.proxied && w.toKproxy == 0:
		return fmt.Errorf("%s: in %d samples of /proc the watch never saw the client connected to kproxy (the watch is blind)", p.name, w.samples)
	case !p.proxied && len(seen) == 0:
		return fmt.Errorf("%s: in %d samples of /proc the watch never saw the client connected to a broker (the watch is blind)", p.name, w.samples)
	case !p.proxied && w.toKproxy > 0:
		return fmt.Errorf("%s: the control run's client was connected to kproxy", p.name)
	}
	return nil
}

// watched runs f, the client's part of a cell; on a cluster cell under a
// socket watch whose findings decide the cell as much as f's.
func (c *cell) watched(f func() error) error {
	if !c.cluster {
		return f()
	}
	w := c.env.cluster.watch()
	err := f()
	w.stop()
	if err != nil {
		return err
	}
	if err := w.check(c.path); err != nil {
		return err
	}
	c.t.Logf("%s: %d samples of the clients' sockets: %d connections to brokers, kproxy seen in %d samples",
		c.path.name, w.samples, len(w.toBrokers), w.toKproxy)
	return nil
}

// topicHost is where a cell's topic lives: the broker or the cluster.
type topicHost interface {
	Codecs(t testing.TB, topic string) map[int8]int
}

// createTopic makes the cell's topic: on the cluster, with partitions
// led by every node (one replica each: the column is about addresses,
// not replication).
func (c *cell) createTopic() topicHost {
	if !c.cluster {
		c.env.kafka.CreateTopic(c.t, c.topic, compatParts)
		return c.env.kafka
	}
	k := c.env.cluster.kafka
	k.CreateTopic(c.t, c.topic, clusterParts, 1)
	c.t.Logf("%s: leaders by partition %v", c.path.name, k.RequireLedByEvery(c.t, c.topic))
	return k
}
