package harness

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ClusterNodes is how many nodes StartKafkaCluster runs: the smallest
// quorum that survives one node being down.
const ClusterNodes = 3

// KafkaCluster is an Apache Kafka KRaft cluster of ClusterNodes processes
// on 127.0.0.1, node ids 1..ClusterNodes, each both broker and controller
// (a three-voter quorum: the fewest processes, and any one node may stop).
// Each broker has one PLAINTEXT client listener advertised as itself, as
// a managed cluster's brokers are: a client that reaches a broker address
// in a response can bypass whatever it bootstrapped through.
type KafkaCluster struct {
	Version string
	Libs    string
	Nodes   []*ClusterNode // by node id, Nodes[i].ID == i+1

	dir string
}

// ClusterNode is one process of the cluster.
type ClusterNode struct {
	*Proc // nil while stopped
	ID    int32
	// Addr is the client listener (PLAINTEXT, advertised as itself);
	// Controller the KRaft controller listener, which clients never see.
	Addr, Controller string

	dir string
}

// StartKafkaCluster formats and starts the nodes of a cluster of version
// with free ports, and returns once every node answers Metadata listing
// all the brokers. Each node has a small heap: three run on a small
// machine next to the clients. A port taken before a node bound it costs
// a retry with new ports (see StartKafka).
func StartKafkaCluster(t testing.TB, version string) *KafkaCluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := startKafkaCluster(t, version)
		if err == nil {
			return c
		}
		lost := slices.ContainsFunc(c.Nodes, func(n *ClusterNode) bool { return portTaken(n.Proc) })
		if attempt == 3 || !lost {
			t.Fatal(err)
		}
		for _, n := range c.Nodes {
			if n.Proc != nil {
				n.Stop(syscall.SIGKILL, 10*time.Second)
			}
		}
		t.Logf("Kafka %s cluster lost a port race (attempt %d); retrying with new ports", version, attempt)
	}
}

func startKafkaCluster(t testing.TB, version string) (*KafkaCluster, error) {
	t.Helper()
	start := time.Now()
	c := &KafkaCluster{Version: version, Libs: KafkaLibs(t, version), dir: t.TempDir()}
	ports := FreePorts(t, 2*ClusterNodes)
	for i := range ClusterNodes {
		n := &ClusterNode{
			ID:         int32(i + 1),
			Addr:       fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			Controller: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]),
			dir:        filepath.Join(c.dir, fmt.Sprintf("node-%d", i+1)),
		}
		c.Nodes = append(c.Nodes, n)
	}
	for _, n := range c.Nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(n.properties(), []byte(c.properties(n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.format(t)
	for _, n := range c.Nodes {
		c.launch(t, n)
	}
	for _, n := range c.Nodes {
		if err := c.waitNode(n); err != nil {
			return c, err
		}
	}
	t.Logf("Kafka %s cluster of %d nodes ready in %v: %v", version, ClusterNodes, time.Since(start).Round(time.Millisecond), c.BrokerAddrs())
	return c, nil
}

// format writes every node's storage with one cluster id, the nodes at
// once (each is a JVM start).
func (c *KafkaCluster) format(t testing.TB) {
	t.Helper()
	id := make([]byte, 16)
	clusterID := "-" // see StartKafka: an id starting with '-' reads as an option
	for clusterID[0] == '-' {
		rand.Read(id)
		clusterID = base64.RawURLEncoding.EncodeToString(id)
	}
	java := Java(t)
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() {
			cmd := exec.Command(java, append(c.jvmArgs(), "kafka.tools.StorageTool", "format", "-t", clusterID, "-c", n.properties())...)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("formatting node %d: %v\n%s", n.ID, err, out)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("Kafka %s cluster: %v", c.Version, err)
		}
	}
}

func (c *KafkaCluster) launch(t testing.TB, n *ClusterNode) {
	t.Helper()
	args := append(c.jvmArgs(), "-Xms128m", "-Xmx256m", "kafka.Kafka", n.properties())
	n.Proc = Start(t, fmt.Sprintf("kafka-%s-node%d", c.Version, n.ID), Java(t), args, Env(), n.dir)
}

// waitNode waits until n answers Metadata listing every broker, or any
// node exits (n cannot list a node that died).
func (c *KafkaCluster) waitNode(n *ClusterNode) error {
	deadline := time.Now().Add(120 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		for _, m := range c.Nodes {
			if m.Proc == nil {
				continue
			}
			select {
			case <-m.Exited():
				return fmt.Errorf("Kafka %s node %d exited: %v\n%s", c.Version, m.ID, m.ExitErr(), m.Tail(40))
			default:
			}
		}
		if last = c.pingNode(n); last == nil {
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("Kafka %s node %d did not come up: %v\n%s", c.Version, n.ID, last, n.Tail(40))
}

func (c *KafkaCluster) pingNode(n *ClusterNode) error {
	if err := pingBrokers(n.Addr, len(c.Nodes)); err != nil {
		return fmt.Errorf("node %d: %w", n.ID, err)
	}
	return nil
}

// Node is the node with id.
func (c *KafkaCluster) Node(id int32) *ClusterNode { return c.Nodes[id-1] }

// StopNode stops node id with SIGTERM: a controlled shutdown, which moves
// the leadership of its partitions to the other nodes first.
func (c *KafkaCluster) StopNode(t testing.TB, id int32) {
	t.Helper()
	n := c.Node(id)
	if err := n.Stop(syscall.SIGTERM, 60*time.Second); err != nil {
		t.Logf("Kafka %s node %d exit after SIGTERM: %v", c.Version, id, err)
	}
	n.Proc = nil
}

// StartNode starts the stopped node id again on its ports and data, and
// returns once it answers Metadata listing every broker. The process
// belongs to t: restart only from the test that started the cluster (or
// one of its subtests that outlives the node).
func (c *KafkaCluster) StartNode(t testing.TB, id int32) {
	t.Helper()
	n := c.Node(id)
	if n.Proc != nil {
		t.Fatalf("Kafka %s node %d is running", c.Version, id)
	}
	c.launch(t, n)
	if err := c.waitNode(n); err != nil {
		t.Fatal(err)
	}
}

// BrokerAddrs are every listener of every node, client and controller:
// the real addresses a client behind kproxy must never be connected to.
func (c *KafkaCluster) BrokerAddrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr, n.Controller)
	}
	return a
}

// Pids are the running nodes' process ids.
func (c *KafkaCluster) Pids() []int {
	var p []int
	for _, n := range c.Nodes {
		if n.Proc != nil {
			p = append(p, n.Pid())
		}
	}
	return p
}

// seeds are the client listeners of the running nodes.
func (c *KafkaCluster) seeds() []string {
	var s []string
	for _, n := range c.Nodes {
		if n.Proc != nil {
			s = append(s, n.Addr)
		}
	}
	return s
}

// Admin is a franz-go admin client to the running nodes directly, closed
// with the test. Tests that watch a client's sockets close it sooner.
func (c *KafkaCluster) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// CreateTopic creates topic with partitions of replicationFactor replicas
// and waits until every partition's leader serves it (see
// Kafka.CreateTopic). It holds no connection to the cluster afterwards.
func (c *KafkaCluster) CreateTopic(t testing.TB, topic string, partitions int32, replicationFactor int16) {
	t.Helper()
	createTopic(t, c.seeds(), topic, partitions, replicationFactor)
}

// Leaders is the leader's node id of each partition of topic, as the
// running nodes report it (-1 for a partition without one).
func (c *KafkaCluster) Leaders(t testing.TB, topic string) map[int32]int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err == nil {
		err = m.Topics[topic].Err
	}
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	leaders := map[int32]int32{}
	for _, p := range m.Topics[topic].Partitions {
		leaders[p.Partition] = p.Leader
	}
	return leaders
}

// RequireLedByEvery fails the test unless every node leads some
// partition of topic: only then does a client that uses the topic talk
// to every broker.
func (c *KafkaCluster) RequireLedByEvery(t testing.TB, topic string) map[int32]int32 {
	t.Helper()
	leaders := c.Leaders(t, topic)
	led := slices.Collect(maps.Values(leaders))
	for _, n := range c.Nodes {
		if !slices.Contains(led, n.ID) {
			t.Fatalf("no partition of %s is led by node %d (leaders by partition %v): the topic does not reach every broker", topic, n.ID, leaders)
		}
	}
	return leaders
}

// Codecs counts topic's first batches by codec, read raw from each
// partition's leader (see Kafka.Codecs).
func (c *KafkaCluster) Codecs(t testing.TB, topic string) map[int8]int {
	t.Helper()
	return codecs(t, c.seeds(), topic)
}

// EndOffsets is the sum of the high watermarks of topic's partitions.
func (c *KafkaCluster) EndOffsets(t testing.TB, topic string) int64 {
	t.Helper()
	return endOffsets(t, c.seeds(), topic)
}

func (c *KafkaCluster) jvmArgs() []string {
	return []string{
		"-cp", filepath.Join(c.Libs, "*"),
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Djava.security.egd=file:/dev/urandom",
	}
}

func (n *ClusterNode) properties() string { return filepath.Join(n.dir, "server.properties") }

// properties are node n's settings. Internal topics have three replicas
// and a min ISR of two, so one node may be down; the leader imbalance
// check runs every few seconds, so a restarted node takes its partitions
// back while a test still watches.
func (c *KafkaCluster) properties(n *ClusterNode) string {
	var voters []string
	for _, v := range c.Nodes {
		voters = append(voters, fmt.Sprintf("%d@%s", v.ID, v.Controller))
	}
	lines := []string{
		"process.roles=broker,controller",
		fmt.Sprintf("node.id=%d", n.ID),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=CLIENT",
		"listeners=CLIENT://" + n.Addr + ",CONTROLLER://" + n.Controller,
		"advertised.listeners=CLIENT://" + n.Addr,
		"listener.security.protocol.map=CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs=" + filepath.Join(n.dir, "data"),
		"num.partitions=6",
		"offsets.topic.replication.factor=3",
		"offsets.topic.num.partitions=6",
		"transaction.state.log.replication.factor=3",
		"transaction.state.log.min.isr=2",
		"transaction.state.log.num.partitions=6",
		"share.coordinator.state.topic.replication.factor=3",
		"share.coordinator.state.topic.min.isr=2",
		"group.initial.rebalance.delay.ms=0",
		"auto.create.topics.enable=false",
		"auto.leader.rebalance.enable=true",
		"leader.imbalance.check.interval.seconds=5",
		"log.flush.interval.messages=1000000",
		"broker.rack=" + Rack(n.ID),
		"replica.selector.class=" + rackSelector,
	}
	return strings.Join(lines, "\n") + "\n"
}
