//go:build linux && nodetest

package node_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// outsideBrokers starts a kfake cluster of n brokers in the test process,
// on the host's end of the node's link: a cluster outside Kubernetes that
// pods reach through the node's routing, as a managed Kafka is reached.
// With port set (n 1) the broker listens there: a broker that comes back.
func outsideBrokers(t *testing.T, n, port int) *kfake.Cluster {
	t.Helper()
	k, err := kfake.NewCluster(kfake.NumBrokers(n), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(n),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(hostIP, strconv.Itoa(port)))
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// clientDeployment is an application Deployment asking for the
// client-pod shape: kproxy in its pod in front of every broker of k,
// the application talking to 127.0.0.1:9092.
func clientDeployment(name string, k *kfake.Cluster, args ...string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					"kproxy.io/inject":    "true",
					"kproxy.io/mode":      "cluster",
					"kproxy.io/bootstrap": k.ListenAddrs()[0],
					"kproxy.io/node-ids":  fmt.Sprintf("0-%d", len(k.ListenAddrs())-1),
				}},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: boolp(false),
					Containers:                   []corev1.Container{appContainer(args...)},
				},
			},
		},
	}
}

// TestClientPodShape: an application Deployment in a labelled namespace
// is injected by kproxy-inject running in the cluster as a webhook, in
// front of brokers outside the cluster. The kubelet starts the sidecar
// and waits for its startup probe before the app, so the app's very
// first connection (one dial, one ApiVersions, no retry) succeeds; its
// records are acknowledged and read back through kproxy. The node is in
// a zone, which the API server's PodTopologyLabels admission copies to
// the pod and the sidecar reads through the downward API: every Fetch
// the app sent without a rack reaches the brokers with the pod's zone.
func TestClientPodShape(t *testing.T) {
	c := nodeCluster(t)
	k := outsideBrokers(t, 3, 0)
	racks := watchRacks(k)
	c.startInjector(t)
	ns := c.namespace(t, "client-shape", map[string]string{"kproxy.io/inject": "enabled"})
	dep := clientDeployment("orders", k, "--brokers", "127.0.0.1:9092", "--topic", "client-shape", "--count", "100", "--hold")
	c.nodeZone(t, "zone-a")
	c.createInjected(t, ns, dep)
	var pod corev1.Pod
	waitFor(t, 3*time.Minute, "the orders pod's app read its records", func() bool {
		for _, p := range c.pods(t, ns, "app=orders") {
			for _, st := range p.Status.ContainerStatuses {
				if st.Name == "app" && (st.State.Running != nil || st.State.Terminated != nil) {
					_, out, _ := c.do("GET", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/log?container=app", ns, p.Name), nil)
					if strings.Contains(string(out), "read 100") || st.State.Terminated != nil || st.RestartCount > 0 {
						pod = p
						return true
					}
				}
			}
		}
		return false
	})
	if z := pod.Labels["topology.kubernetes.io/zone"]; z != "zone-a" {
		t.Fatalf("the pod's zone label is %q: the PodTopologyLabels admission did not copy the node's", z)
	}
	out := c.logs(t, ns, pod.Name, "app")
	for _, want := range []string{"first-dial ok", "produced 100", "read 100"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the app's log lacks %q:\n%s", want, out)
		}
	}
	for _, st := range pod.Status.ContainerStatuses {
		if st.RestartCount > 0 {
			t.Fatalf("container %s restarted %d times", st.Name, st.RestartCount)
		}
	}
	// kproxy fronted every broker: it learnt each from Metadata (the app
	// only ever dialled 127.0.0.1, and was told 127.0.0.1 node ports),
	// and relayed the app's connections to them: the bootstrap and those
	// that lead its partitions (kfake places the leaders itself).
	plog := c.logs(t, ns, pod.Name, "kproxy")
	learnt, relayed := map[string]bool{}, map[string]int{}
	for _, line := range strings.Split(plog, "\n") {
		var l struct{ Message, Broker, Upstream string }
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch l.Message {
		case "broker learnt":
			learnt[l.Broker] = true
		case "connection opened":
			_, to, _ := strings.Cut(l.Upstream, ">")
			relayed[to]++
		}
	}
	total := 0
	for _, addr := range k.ListenAddrs() {
		if !learnt[addr] {
			t.Fatalf("kproxy's log shows no broker learnt at %s:\n%s", addr, plog)
		}
		total += relayed[addr]
	}
	if total < 2 || total != sum(relayed) {
		t.Fatalf("kproxy relayed connections to %v, want them all to the brokers %v, and more than the first dial:\n%s", relayed, k.ListenAddrs(), plog)
	}
	if got := racks.seen(); len(got) != 1 || got["zone-a"] == 0 {
		t.Fatalf("the brokers read Fetch requests with racks %v, want only the pod's zone-a", got)
	}
}

// nodeZone labels the node with zone (topology.kubernetes.io/zone), as a
// cloud's node controller does, until the end of the test.
func (c *cluster) nodeZone(t *testing.T, zone string) {
	t.Helper()
	patch := func(v any) {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"topology.kubernetes.io/zone": v}}})
		if code, body, err := c.do("PATCH", "/api/v1/nodes/"+nodeName, b); err != nil || code != 200 {
			t.Errorf("label the node's zone %v: %d %v: %s", v, code, err, body)
		}
	}
	patch(zone)
	t.Cleanup(func() { patch(nil) })
}

// fetchRacks counts the rack ids of the Fetch requests (v11+) a kfake
// cluster reads.
type fetchRacks struct {
	mu    sync.Mutex
	racks map[string]int
}

// watchRacks has k report every Fetch, then answer it as usual.
func watchRacks(k *kfake.Cluster) *fetchRacks {
	r := &fetchRacks{racks: map[string]int{}}
	k.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if f := req.(*kmsg.FetchRequest); f.Version >= 11 {
			r.mu.Lock()
			r.racks[f.Rack]++
			r.mu.Unlock()
		}
		return nil, nil, false
	})
	return r
}

func (r *fetchRacks) seen() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.racks)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
