package k8s_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apply sends obj to the API server as a server-side apply with strict
// field validation, as `kubectl apply --server-side` does, and fails the
// test with the server's answer when it is refused. path is the object's
// URL below the server, without the query.
func (s *apiServer) apply(t *testing.T, path string, obj any) []byte {
	t.Helper()
	body, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	code, resp, err := s.do(http.MethodPatch, path+"?fieldManager=kproxy-test&fieldValidation=Strict&force=true", "application/apply-patch+yaml", body)
	if err != nil || code/100 != 2 {
		t.Fatalf("server-side apply of %s: %d %s %v", path, code, resp, err)
	}
	return resp
}

// TestExampleAppliesToAPIServer applies the example, as kustomize builds
// it, to a real API server with strict server-side validation, so the
// native sidecar, its probes and security context must pass the real
// schema and validation, not just decode into the Go types.
func TestExampleAppliesToAPIServer(t *testing.T) {
	e := load(t)
	s := startAPIServer(t)
	const ns = "default"
	for name, keys := range e.configMaps {
		cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{}}
		for key, file := range keys {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			cm.Data[key] = string(b)
		}
		s.apply(t, fmt.Sprintf("/api/v1/namespaces/%s/configmaps/%s", ns, name), cm)
	}
	for name, svc := range e.services {
		s.apply(t, fmt.Sprintf("/api/v1/namespaces/%s/services/%s", ns, name), svc)
	}
	s.apply(t, fmt.Sprintf("/apis/apps/v1/namespaces/%s/deployments/%s", ns, e.jaeger.Name), e.jaeger)
	stored := s.apply(t, fmt.Sprintf("/apis/apps/v1/namespaces/%s/statefulsets/%s", ns, e.kafka.Name), e.kafka)
	applyVariants(t, s)

	// The stored sidecar is still a native sidecar with its probes: the
	// server neither dropped nor defaulted away what the example sets.
	var got struct {
		Spec struct {
			Template struct {
				Spec corev1.PodSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(stored, &got); err != nil {
		t.Fatal(err)
	}
	var sidecar *corev1.Container
	for i, c := range got.Spec.Template.Spec.InitContainers {
		if strings.Contains(c.Name, "kproxy") {
			sidecar = &got.Spec.Template.Spec.InitContainers[i]
		}
	}
	switch {
	case sidecar == nil:
		t.Fatalf("stored StatefulSet has no kproxy init container: %+v", got.Spec.Template.Spec.InitContainers)
	case sidecar.RestartPolicy == nil || *sidecar.RestartPolicy != corev1.ContainerRestartPolicyAlways:
		t.Errorf("stored kproxy sidecar lost restartPolicy: Always")
	case sidecar.StartupProbe == nil || sidecar.LivenessProbe == nil || sidecar.ReadinessProbe == nil:
		t.Errorf("stored kproxy sidecar lost a probe: startup %v liveness %v readiness %v", sidecar.StartupProbe, sidecar.LivenessProbe, sidecar.ReadinessProbe)
	case sidecar.SecurityContext == nil || sidecar.SecurityContext.ReadOnlyRootFilesystem == nil || !*sidecar.SecurityContext.ReadOnlyRootFilesystem:
		t.Errorf("stored kproxy sidecar lost its read-only root filesystem")
	}
}

// applyVariants applies the example's other shapes, each in a namespace of
// its own: the StatefulSet and client Pod of the tls component, and the
// client-pod kustomization's Deployment, whose sidecars are patched from
// files of their own. Pods need the namespace's default ServiceAccount,
// which without a controller manager the test makes itself.
func applyVariants(t *testing.T, s *apiServer) {
	t.Helper()
	tls, clientPod := load(t, "tls"), loadClientPod(t)
	for _, ns := range []string{"tls", "client-pod"} {
		s.createNamespace(t, ns, nil)
		s.apply(t, "/api/v1/namespaces/"+ns+"/serviceaccounts/default",
			map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default"}})
	}
	s.apply(t, "/apis/apps/v1/namespaces/tls/statefulsets/"+tls.kafka.Name, tls.kafka)
	for name, p := range tls.pods {
		s.apply(t, "/api/v1/namespaces/tls/pods/"+name, p)
	}
	s.apply(t, "/apis/apps/v1/namespaces/client-pod/deployments/"+clientPod.app.Name, clientPod.app)
}
