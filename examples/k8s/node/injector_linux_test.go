//go:build linux && nodetest

package node_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// injectorNS is where kproxy-inject runs, as inject/webhook.yaml says.
const injectorNS = "kproxy-system"

var injectorOnce sync.Once

// startInjector runs kproxy-inject --serve as a Deployment in the cluster,
// with its serving certificate in a Secret, behind the Service and the
// MutatingWebhookConfiguration of inject/webhook.yaml (caBundle filled in
// as cert-manager's cainjector would), once per run; it returns once the
// API server's calls reach it.
func (c *cluster) startInjector(t *testing.T) {
	t.Helper()
	injectorOnce.Do(func() { c.startInjectorOnce(t) })
	if !c.injecting {
		t.Fatal("kproxy-inject did not start (see the first test that asked for it)")
	}
}

func (c *cluster) startInjectorOnce(t *testing.T) {
	c.create(t, "Namespace", "", &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: injectorNS},
	})
	waitFor(t, time.Minute, "the default ServiceAccount in "+injectorNS, func() bool {
		var sa corev1.ServiceAccount
		return c.get(t, "ServiceAccount", injectorNS, "default", &sa)
	})
	host := "kproxy-inject." + injectorNS + ".svc"
	cert, key, err := c.ca.issue(10, host, []string{host, "kproxy-inject." + injectorNS}, []net.IP{})
	if err != nil {
		t.Fatal(err)
	}
	c.create(t, "Secret", injectorNS, &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "kproxy-inject-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": cert, "tls.key": key},
	})
	labels := map[string]string{"app.kubernetes.io/name": "kproxy-inject"}
	c.create(t, "Deployment", injectorNS, &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "kproxy-inject"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: boolp(false),
					Containers: []corev1.Container{{
						Name:            "kproxy-inject",
						Image:           injectImage,
						ImagePullPolicy: corev1.PullNever,
						Args: []string{"--serve", "0.0.0.0:8443", "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key",
							"--image", kproxyImage, "--otlp-endpoint", ""},
						Ports: []corev1.ContainerPort{{Name: "https", ContainerPort: 8443}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("https"), Scheme: corev1.URISchemeHTTPS}},
							PeriodSeconds: 1,
						},
						VolumeMounts:    []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}},
						SecurityContext: &corev1.SecurityContext{RunAsNonRoot: boolp(true), RunAsUser: int64p(65532), ReadOnlyRootFilesystem: boolp(true)},
					}},
					Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "kproxy-inject-tls"}}}},
				},
			},
		},
	})
	svc, hook := webhookObjects(t)
	c.create(t, "Service", injectorNS, svc)
	for i := range hook.Webhooks {
		hook.Webhooks[i].ClientConfig.CABundle = c.ca.PEM
		// failurePolicy Ignore admits workloads unmutated while the
		// injector is down; the tests check the injection themselves.
	}
	c.create(t, "MutatingWebhookConfiguration", "", hook)
	waitFor(t, 2*time.Minute, "kproxy-inject ready", func() bool {
		for _, p := range c.pods(t, injectorNS, "app.kubernetes.io/name=kproxy-inject") {
			if podReady(&p) {
				return true
			}
		}
		return false
	})
	c.injecting = true
}

// webhookObjects reads the Service and the MutatingWebhookConfiguration
// from inject/webhook.yaml, the file users apply.
func webhookObjects(t *testing.T) (*corev1.Service, *admissionv1.MutatingWebhookConfiguration) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "inject", "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var svc *corev1.Service
	var hook *admissionv1.MutatingWebhookConfiguration
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("inject/webhook.yaml: %v", err)
		}
		switch meta.Kind {
		case "Service":
			svc = &corev1.Service{}
			err = yaml.Unmarshal([]byte(doc), svc)
		case "MutatingWebhookConfiguration":
			hook = &admissionv1.MutatingWebhookConfiguration{}
			err = yaml.Unmarshal([]byte(doc), hook)
		}
		if err != nil {
			t.Fatalf("inject/webhook.yaml: %v", err)
		}
	}
	if svc == nil || hook == nil || svc.Namespace != injectorNS {
		t.Fatalf("inject/webhook.yaml holds no Service in %s and MutatingWebhookConfiguration", injectorNS)
	}
	return svc, hook
}

// createInjected creates a Deployment in a namespace the webhook selects
// and fails unless the API server stored it with the kproxy sidecar: the
// webhook's failurePolicy is Ignore, so a call that did not reach the
// injector would admit it bare. A server-side dry run is retried until
// the injection shows (the Service's endpoints can lag the pod's
// readiness), then the Deployment is created.
func (c *cluster) createInjected(t *testing.T, ns string, dep *appsv1.Deployment) {
	t.Helper()
	b, _ := json.Marshal(dep)
	var last string
	injected := func() bool {
		code, body, err := c.do("POST", resourcePath("Deployment", ns)+"?dryRun=All", b)
		if err != nil || code/100 != 2 {
			last = string(body)
			return false
		}
		var got appsv1.Deployment
		json.Unmarshal(body, &got)
		last = "no kproxy init container in " + string(body)
		return sidecarOf(&got.Spec.Template.Spec) != nil
	}
	deadline := time.Now().Add(time.Minute)
	for !injected() {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook never injected %s/%s: %s", ns, dep.Name, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
	c.create(t, "Deployment", ns, dep)
	if sidecarOf(&dep.Spec.Template.Spec) == nil {
		t.Fatalf("%s/%s was stored without the sidecar", ns, dep.Name)
	}
}

// sidecarOf is the kproxy native sidecar of a pod spec, or nil.
func sidecarOf(spec *corev1.PodSpec) *corev1.Container {
	for i, ic := range spec.InitContainers {
		if ic.Name == "kproxy" && ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return &spec.InitContainers[i]
		}
	}
	return nil
}
