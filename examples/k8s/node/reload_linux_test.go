//go:build linux && nodetest

package node_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// liveConfig is the broker pod's kproxy.yaml for the reload test, with
// policy rules (YAML list items) under policies.rules.
func liveConfig(rules string) string {
	return `proxy:
  listen: 0.0.0.0:9092
  upstream: 127.0.0.1:19092
admin:
  listen: 0.0.0.0:9190
log:
  format: json
tls:
  reload_interval: 1s
  listener:
    cert_file: /etc/kproxy/tls/tls.crt
    key_file: /etc/kproxy/tls/tls.key
policies:
  rules:
` + rules
}

const noRules = "    []\n"

// TestLiveReload: in the broker-pod shape with a TLS listener, the
// kubelet's updates of the mounted Secret and ConfigMap reach a running
// kproxy. After the Secret is rotated through the API, kproxy logs the
// reload, a new connection is served the new certificate (its serial) and
// a connection opened before still relays. After the policy ConfigMap is
// edited, the new rule refuses on that same live connection what it
// allowed before; kproxy never restarted.
func TestLiveReload(t *testing.T) {
	c := nodeCluster(t)
	ns := c.namespace(t, "live-reload", nil)
	secret := func(serial int64) *corev1.Secret {
		cert, key, err := c.ca.issue(serial, "kafka-0", []string{"kafka-0"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: "kproxy-tls"},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"tls.crt": cert, "tls.key": key},
		}
	}
	c.create(t, "Secret", ns, secret(100))
	c.create(t, "ConfigMap", ns, &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "kproxy-config"},
		Data:       map[string]string{"kproxy.yaml": liveConfig(noRules)},
	})
	sidecar := kproxySidecar("kproxy-config")
	// The whole Secret mounted (no subPath): the kubelet swaps its
	// ..data link, which kproxy's reload sees.
	sidecar.VolumeMounts = append(sidecar.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/etc/kproxy/tls", ReadOnly: true})
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "kafka-0"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: boolp(false),
			InitContainers:               []corev1.Container{sidecar},
			Containers: []corev1.Container{{
				Name: "kafka", Image: brokerImage, ImagePullPolicy: corev1.PullNever,
				Env:  []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Args: []string{"--listen", "127.0.0.1:19092", "--advertise", "$(POD_IP):9092"},
			}},
			Volumes: []corev1.Volume{configVolume("kproxy-config"),
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "kproxy-tls"}}}},
		},
	}
	c.create(t, "Pod", ns, pod)
	p := c.waitPod(t, ns, "kafka-0", 2*time.Minute, "ready", podReady)
	addr := net.JoinHostPort(p.Status.PodIP, "9092")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca.PEM)
	dial := func() (*rawKafka, int64) {
		t.Helper()
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "kafka-0"})
		if err != nil {
			t.Fatalf("TLS to kproxy at %s: %v", addr, err)
		}
		t.Cleanup(func() { conn.Close() })
		return &rawKafka{c: conn}, conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	live, serial := dial()
	if serial != 100 {
		t.Fatalf("kproxy served certificate serial %d, want 100", serial)
	}
	if code, err := live.createTopic("allowed-before"); err != nil || code != 0 {
		t.Fatalf("CreateTopics before any rule: code %d, %v", code, err)
	}
	proxyLog := c.followLog(t, ns, "kafka-0", "kproxy")

	// 4. The Secret rotated through the API.
	rotated := time.Now()
	c.patch(t, "Secret", ns, "kproxy-tls", map[string]any{"data": secret(101).Data})
	waitFor(t, 2*time.Minute, "kproxy's log shows the rotated certificate loaded", func() bool {
		return strings.Contains(proxyLog.String(), `"message":"TLS files reloaded"`)
	})
	t.Logf("the kubelet's update of the Secret reached kproxy %v after the API write", time.Since(rotated).Round(time.Second))
	if _, serial := dial(); serial != 101 {
		t.Fatalf("a new connection after the reload was served serial %d, want 101", serial)
	}
	if code, err := live.apiVersions(); err != nil || code != 0 {
		t.Fatalf("the connection opened before the rotation no longer relays: code %d, %v", code, err)
	}

	// 5. The policy ConfigMap edited through the API.
	edited := time.Now()
	c.patch(t, "ConfigMap", ns, "kproxy-config", map[string]any{"data": map[string]string{"kproxy.yaml": liveConfig(
		"    - name: no-topic-creation\n      match: {apis: [CreateTopics]}\n      action: reject\n")}})
	waitFor(t, 2*time.Minute, "kproxy's log shows the new rules loaded", func() bool {
		return strings.Contains(proxyLog.String(), `"message":"policies reloaded"`)
	})
	t.Logf("the kubelet's update of the ConfigMap reached kproxy %v after the API write", time.Since(edited).Round(time.Second))
	code, err := live.createTopic("refused-after")
	if err != nil {
		t.Fatalf("CreateTopics on the live connection after the edit: %v", err)
	}
	if code != 29 && code != 31 { // TOPIC_ or CLUSTER_AUTHORIZATION_FAILED: kproxy's reject
		t.Fatalf("the live connection's CreateTopics got code %d after the rule was added to the ConfigMap, want kproxy's refusal (29 or 31)", code)
	}
	p = c.waitPod(t, ns, "kafka-0", time.Second, "still running", func(*corev1.Pod) bool { return true })
	for _, st := range p.Status.InitContainerStatuses {
		if st.Name == "kproxy" && st.RestartCount != 0 {
			t.Fatalf("kproxy restarted %d times: the reloads must not need a restart", st.RestartCount)
		}
	}
}
