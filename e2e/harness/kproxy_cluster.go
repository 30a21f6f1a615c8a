package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// ClusterKproxy is a kproxy in cluster mode in front of a KafkaCluster:
// Addr is its bootstrap listener, NodeAddrs its listener for each node
// (NodeAddrs[i] serves node id i+1).
type ClusterKproxy struct {
	*Kproxy
	NodeAddrs []string
}

// StartClusterKproxy runs `kproxy run` in cluster mode in front of c: the
// bootstrap listener and admin server on free ports, proxy.upstream the
// first node (one broker, as a user gives a bootstrap address), and the
// node ports a free block of one port per node id, written as the
// cluster: section of a config file. extra adds flags. It returns once
// /readyz answers 200.
func StartClusterKproxy(t testing.TB, name string, c *KafkaCluster, extra ...string) *ClusterKproxy {
	t.Helper()
	return StartClusterKproxyWith(t, name, c, "", extra...)
}

// StartClusterKproxyWith is StartClusterKproxy with more sections of
// kproxy.yaml (YAML text, not cluster:).
func StartClusterKproxyWith(t testing.TB, name string, c *KafkaCluster, sections string, extra ...string) *ClusterKproxy {
	t.Helper()
	ids := len(c.Nodes)
	base := FreePortRange(t, ids)
	conf := fmt.Sprintf("cluster:\n  node_port_base: %d\n  node_ids: {min: 1, max: %d}\n", base, ids) + sections
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", FreePorts(t, 1)[0])
	kp := &ClusterKproxy{Kproxy: StartKproxy(t, name, listen, c.Nodes[0].Addr, append([]string{"--config", path}, extra...)...)}
	for i := range ids {
		kp.NodeAddrs = append(kp.NodeAddrs, fmt.Sprintf("127.0.0.1:%d", base+i))
	}
	t.Logf("%s fronts the cluster: bootstrap %s, nodes %v", name, kp.Addr, kp.NodeAddrs)
	return kp
}

// Addrs are every address kproxy serves Kafka on: bootstrap and nodes.
func (k *ClusterKproxy) Addrs() []string { return append([]string{k.Addr}, k.NodeAddrs...) }
