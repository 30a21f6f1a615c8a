//go:build linux && nodetest

package node_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestBrokerPodShape: the broker's pod with the kproxy sidecar in front of
// its port (the broker listens on loopback only), reached by a client pod
// through a Service (kube-proxy's NAT to the pod's address): the client's
// records are acknowledged and read back, and kproxy relayed them.
func TestBrokerPodShape(t *testing.T) {
	c := nodeCluster(t)
	ns := c.namespace(t, "broker-shape", nil)
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "kafka"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "kafka"},
			Ports:    []corev1.ServicePort{{Name: "kafka", Port: 9092, TargetPort: intstr.FromString("kafka")}},
		},
	}
	c.create(t, "Service", ns, svc)
	// The broker advertises the Service's address: every connection a
	// client makes, bootstrap or not, goes through the Service to kproxy.
	advertised := fmt.Sprintf("%s:9092", svc.Spec.ClusterIP)
	c.create(t, "ConfigMap", ns, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "kproxy-config"},
		Data: map[string]string{"kproxy.yaml": `proxy:
  listen: 0.0.0.0:9092
  upstream: 127.0.0.1:19092
  drain_timeout: 10s
admin:
  listen: 0.0.0.0:9190
log:
  level: info
  format: json
`},
	})
	broker := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "kafka-0", Labels: map[string]string{"app": "kafka"}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: boolp(false),
			InitContainers:               []corev1.Container{kproxySidecar("kproxy-config")},
			Containers: []corev1.Container{{
				Name:            "kafka",
				Image:           brokerImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"--listen", "127.0.0.1:19092", "--advertise", advertised},
			}},
			Volumes: []corev1.Volume{configVolume("kproxy-config")},
		},
	}
	c.create(t, "Pod", ns, broker)
	c.waitPod(t, ns, "kafka-0", 2*time.Minute, "ready", podReady)
	c.waitEndpoints(t, ns, "kafka", time.Minute)

	client := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: boolp(false),
			RestartPolicy:                corev1.RestartPolicyNever,
			Containers: []corev1.Container{appContainer("--brokers", advertised, "--topic", "broker-shape", "--count", "100",
				// kube-proxy writes the Service's rules a moment after the
				// slice: a dial before then is refused and franz-go retries.
				// The sidecar-readiness check belongs to the client shape.
				"--first-dial=false")},
		},
	}
	c.create(t, "Pod", ns, client)
	p := c.waitPod(t, ns, "client", 2*time.Minute, "finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	out := c.logs(t, ns, "client", "app")
	if p.Status.Phase != corev1.PodSucceeded || !strings.Contains(out, "produced 100") || !strings.Contains(out, "read 100") {
		t.Fatalf("the client pod %s:\n%s", p.Status.Phase, out)
	}
	// kproxy logs each connection it closes with what it relayed.
	plog := c.logs(t, ns, "kafka-0", "kproxy")
	if !strings.Contains(plog, `"message":"kproxy listening"`) {
		t.Fatalf("kproxy's log does not show it listening:\n%s", plog)
	}
}

// podReady: the pod's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
