package k8s_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// webhookPort is where the test serves kproxy-inject --serve.
const webhookPort = 29513

// injectDir is the kproxy-inject module, next to this one.
const injectDir = "../../inject"

// buildInject builds kproxy-inject from its module into the test's
// temporary directory.
func buildInject(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kproxy-inject")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/kproxy-inject")
	cmd.Dir = injectDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build kproxy-inject: %v\n%s", err, out)
	}
	return bin
}

// serveInject starts kproxy-inject --serve on 127.0.0.1 with a generated
// certificate and returns the CA that signed it (PEM) and a stop function,
// which is also run at the end of the test.
func serveInject(t *testing.T, bin string) (caPEM []byte, stop func()) {
	t.Helper()
	dir := t.TempDir()
	caPEM, certPEM, keyPEM := servingCert(t, "kproxy-inject")
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	stop, _ = startProcess(t, "kproxy-inject", bin, "--serve", fmt.Sprintf("127.0.0.1:%d", webhookPort), "--tls-cert", cert, "--tls-key", key)
	return caPEM, stop
}

// registerWebhook registers inject/webhook.yaml's
// MutatingWebhookConfiguration, its Service reference replaced by the URL
// the test serves kproxy-inject on (there are no Services to route to
// without a cluster), with caBundle set as cert-manager would set it.
func (s *apiServer) registerWebhook(t *testing.T, caPEM []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(injectDir, "webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := bytes.Cut(raw, []byte("\n---\n"))
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(doc, &cfg); err != nil {
		t.Fatalf("inject/webhook.yaml: %v", err)
	}
	if len(cfg.Webhooks) != 1 || cfg.Webhooks[0].ClientConfig.Service == nil {
		t.Fatalf("inject/webhook.yaml: want one webhook calling a Service, got %+v", cfg.Webhooks)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", webhookPort, *cfg.Webhooks[0].ClientConfig.Service.Path)
	cfg.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	s.apply(t, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"+cfg.Name, cfg)
}

// waitWebhook dry-runs an annotated Deployment in ns until the API server
// answers with it injected. A registered webhook reaches the server's
// admission chain through a watch, so a create right after registering
// can miss it; and TestInjectWebhookDown must know the webhook was live
// before it stops the injector.
func (s *apiServer) waitWebhook(t *testing.T, ns string) {
	t.Helper()
	probe := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"webhook-probe"},` +
		`"spec":{"selector":{"matchLabels":{"app":"probe"}},"template":{"metadata":{"labels":{"app":"probe"},` +
		`"annotations":{"kproxy.io/inject":"true"}},"spec":{"containers":[{"name":"app","image":"example/app:1"}]}}}}`)
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		code, resp, err := s.do(http.MethodPost, "/apis/apps/v1/namespaces/"+ns+"/deployments?dryRun=All", "application/json", probe)
		if err == nil && code == http.StatusCreated && bytes.Contains(resp, []byte(`"kproxy"`)) {
			return
		}
		last = fmt.Sprintf("%d %s %v", code, resp, err)
	}
	t.Fatalf("the API server did not call the registered webhook within 30s: %s", last)
}

// createNamespace creates a namespace with the given labels.
func (s *apiServer) createNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	s.apply(t, "/api/v1/namespaces/"+name, map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": labels},
	})
}

// create POSTs one apps/v1 document (YAML) into ns and returns, as the
// server answered it, the stored object's whole spec with its labels and
// annotations: everything an injector could patch, without the fields the
// server sets per object (uid, timestamps, namespace).
func (s *apiServer) create(t *testing.T, ns string, doc []byte) (kind, name string, stored json.RawMessage) {
	t.Helper()
	var obj struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	body, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatal(err)
	}
	resource := map[string]string{"Deployment": "deployments", "StatefulSet": "statefulsets"}[obj.Kind]
	code, resp, err := s.do(http.MethodPost, fmt.Sprintf("/apis/apps/v1/namespaces/%s/%s?fieldValidation=Strict", ns, resource), "application/json", body)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("create %s %s in %s: %d %s %v", obj.Kind, obj.Metadata.Name, ns, code, resp, err)
	}
	var got struct {
		Metadata struct {
			Labels      json.RawMessage `json:"labels,omitempty"`
			Annotations json.RawMessage `json:"annotations,omitempty"`
		} `json:"metadata"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(resp, &got); err != nil {
		t.Fatal(err)
	}
	stored, err = json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	return obj.Kind, obj.Metadata.Name, stored
}

// appsDocs returns the apps/v1 documents of a multi-document manifest.
func appsDocs(t *testing.T, manifest []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, doc := range bytes.Split(manifest, []byte("\n---\n")) {
		var meta struct{ APIVersion string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.APIVersion == "apps/v1" {
			out = append(out, doc)
		}
	}
	return out
}

// TestInjectWebhookThroughAPIServer registers the injector's webhook with
// a real API server and creates inject/testdata/in.yaml's Deployments and
// StatefulSets in a namespace labelled for injection. Each stored object
// must equal what the API server stores for the CLI's output of the same
// manifest in a namespace without the label (so both pass through the
// same defaulting): annotated ones carry the sidecar exactly as the CLI
// injects it, the unannotated one is untouched.
func TestInjectWebhookThroughAPIServer(t *testing.T) {
	bin := buildInject(t)
	in, err := os.ReadFile(filepath.Join(injectDir, "testdata", "in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := exec.Command(bin, "-f", filepath.Join(injectDir, "testdata", "in.yaml")).Output()
	if err != nil {
		t.Fatalf("kproxy-inject -f in.yaml: %v", err)
	}

	s := startAPIServer(t)
	caPEM, _ := serveInject(t, bin)
	s.registerWebhook(t, caPEM)
	s.createNamespace(t, "injected", map[string]string{"kproxy.io/inject": "enabled"})
	s.createNamespace(t, "by-cli", nil)
	s.waitWebhook(t, "injected")

	want := map[string]json.RawMessage{}
	for _, doc := range appsDocs(t, cli) {
		kind, name, stored := s.create(t, "by-cli", doc)
		want[kind+"/"+name] = stored
	}
	injected := 0
	for _, doc := range appsDocs(t, in) {
		kind, name, got := s.create(t, "injected", doc)
		if !bytes.Equal(compact(t, got), compact(t, want[kind+"/"+name])) {
			t.Errorf("%s %s through the webhook:\n%s\nwant, as the CLI injects it:\n%s", kind, name, got, want[kind+"/"+name])
		}
		if bytes.Contains(got, []byte(`"kproxy"`)) {
			injected++
		}
	}
	// in.yaml has three workloads that ask for the sidecar and one that
	// does not; the equality above alone would pass if neither injected.
	if injected != 3 {
		t.Errorf("%d stored workloads carry a kproxy container; want 3", injected)
	}
}

// TestInjectWebhookDown checks failurePolicy: Ignore from
// inject/webhook.yaml against the real API server: with kproxy-inject
// stopped, an annotated Deployment is still created, without the sidecar.
func TestInjectWebhookDown(t *testing.T) {
	bin := buildInject(t)
	s := startAPIServer(t)
	caPEM, stop := serveInject(t, bin)
	s.registerWebhook(t, caPEM)
	s.createNamespace(t, "injected", map[string]string{"kproxy.io/inject": "enabled"})
	s.waitWebhook(t, "injected")
	stop()
	doc := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  selector:\n    matchLabels:\n      app: app\n  template:\n    metadata:\n      labels:\n        app: app\n      annotations:\n        kproxy.io/inject: \"true\"\n    spec:\n      containers:\n        - name: app\n          image: example/app:1\n")
	start := time.Now()
	_, _, got := s.create(t, "injected", doc)
	if bytes.Contains(got, []byte(`"kproxy"`)) {
		t.Errorf("created with the webhook down, yet carries kproxy:\n%s", got)
	}
	t.Logf("created in %v with the webhook down", time.Since(start))
}

// compact re-encodes JSON so that equal objects compare equal.
func compact(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
