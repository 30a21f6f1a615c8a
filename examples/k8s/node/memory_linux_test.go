//go:build linux && nodetest

package node_test

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMemoryLimitAndReadiness: kproxy in a container limited to 256Mi
// sizes its buffer budget from the container's cgroup (v1
// memory.limit_in_bytes on this node) and Go's soft memory limit from
// that, and says so in its log; its readiness probe (/readyz) takes the
// pod out of service while its upstream is down and back once it returns.
func TestMemoryLimitAndReadiness(t *testing.T) {
	c := nodeCluster(t)
	k := outsideBrokers(t, 1, 0)
	upstream := k.ListenAddrs()[0]
	_, port, _ := net.SplitHostPort(upstream)
	ns := c.namespace(t, "memory", nil)
	c.create(t, "ConfigMap", ns, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "kproxy-config"},
		Data: map[string]string{"kproxy.yaml": "proxy:\n  listen: 0.0.0.0:9092\n  upstream: " + upstream +
			"\nadmin:\n  listen: 0.0.0.0:9190\nlog:\n  format: json\n"},
	})
	sidecar := kproxySidecar("kproxy-config")
	sidecar.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
	c.create(t, "Pod", ns, &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "limited"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: boolp(false),
			InitContainers:               []corev1.Container{sidecar},
			// The pod's application: any process; kfake on loopback idles.
			Containers: []corev1.Container{{Name: "app", Image: brokerImage, ImagePullPolicy: corev1.PullNever, Args: []string{"--listen", "127.0.0.1:19092"}}},
			Volumes:    []corev1.Volume{configVolume("kproxy-config")},
		},
	})
	c.waitPod(t, ns, "limited", 2*time.Minute, "ready", podReady)

	const limit = 256 << 20
	var budget, soft struct {
		From   string `json:"from"`
		Budget int64  `json:"max_buffered_bytes"`
		Limit  int64  `json:"memory_limit"`
	}
	for _, line := range strings.Split(c.logs(t, ns, "limited", "kproxy"), "\n") {
		switch {
		case strings.Contains(line, `"message":"process-wide buffer budget"`):
			json.Unmarshal([]byte(line), &budget)
		case strings.Contains(line, `"message":"soft memory limit`):
			json.Unmarshal([]byte(line), &soft)
		}
	}
	t.Logf("256Mi container: max_buffered_bytes %d (%s), Go memory limit %d", budget.Budget, budget.From, soft.Limit)
	if budget.From != "half of cgroup memory.limit_in_bytes" || budget.Budget != limit/2 {
		t.Errorf("kproxy's buffer budget is %d from %q, want %d from half of cgroup memory.limit_in_bytes", budget.Budget, budget.From, limit/2)
	}
	if soft.Limit <= budget.Budget || soft.Limit >= limit {
		t.Errorf("Go's soft memory limit %d, want between the budget %d and the container's limit %d", soft.Limit, budget.Budget, limit)
	}

	// The upstream goes away: /readyz fails, the kubelet marks the pod
	// not ready; it comes back on the same port: ready again.
	k.Close()
	down := time.Now()
	c.waitPod(t, ns, "limited", 2*time.Minute, "not ready once its upstream is down", func(p *corev1.Pod) bool { return !podReady(p) })
	t.Logf("not ready %v after the upstream went down", time.Since(down).Round(time.Second))
	p, _ := strconv.Atoi(port)
	outsideBrokers(t, 1, p)
	back := time.Now()
	c.waitPod(t, ns, "limited", 2*time.Minute, "ready again once its upstream is back", podReady)
	t.Logf("ready %v after the upstream came back", time.Since(back).Round(time.Second))
}
