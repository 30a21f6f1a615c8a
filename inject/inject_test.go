package inject

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/out.yaml from the injector's output")

// The golden manifest: what kproxy-inject writes for testdata/in.yaml.
func TestManifestGolden(t *testing.T) {
	in, err := os.ReadFile("testdata/in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Manifest(in, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/out.yaml", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/out.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("output differs from testdata/out.yaml (go test -update rewrites it):\n%s", got)
	}
}

// Injecting an injected manifest changes nothing.
func TestInjectTwiceIsOnce(t *testing.T) {
	out, err := os.ReadFile("testdata/out.yaml")
	if err != nil {
		t.Fatal(err)
	}
	again, err := Manifest(out, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, out) {
		t.Fatalf("a second injection changed the manifest:\n%s", again)
	}
}

// decodeAll decodes every document of a manifest strictly with the
// Kubernetes API types.
func decodeAll(t *testing.T, manifest []byte) map[string]any {
	t.Helper()
	objs := map[string]any{}
	for i, doc := range bytes.Split(manifest, []byte("\n---")) {
		var meta struct {
			APIVersion, Kind string
			Metadata         struct{ Name string }
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
		var obj any
		switch meta.Kind {
		case "StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "Deployment":
			obj = &appsv1.Deployment{}
		case "Service":
			obj = &corev1.Service{}
		case "MutatingWebhookConfiguration":
			obj = &admissionregistrationv1.MutatingWebhookConfiguration{}
		default:
			t.Fatalf("document %d: unexpected kind %q", i+1, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("document %d (%s): %v", i+1, meta.Kind, err)
		}
		objs[meta.Kind+"/"+meta.Metadata.Name] = obj
	}
	return objs
}

// The output decodes strictly, the sidecar sits where asked with the
// ports asked for, and what did not ask is untouched.
func TestManifestOutput(t *testing.T) {
	out, err := os.ReadFile("testdata/out.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	sts := objs["StatefulSet/kafka"].(*appsv1.StatefulSet).Spec.Template.Spec
	if len(sts.InitContainers) != 1 || !reflect.DeepEqual(sts.InitContainers[0], Sidecar(Defaults(), Asked{Listen: 9094, Upstream: 29092})) {
		t.Errorf("StatefulSet init containers: %+v", sts.InitContainers)
	}
	if args := strings.Join(sts.InitContainers[0].Args, " "); !strings.Contains(args, "--listen 0.0.0.0:9094 --upstream 127.0.0.1:29092") {
		t.Errorf("sidecar args %q do not carry the annotated ports", args)
	}
	app := objs["Deployment/app"].(*appsv1.Deployment).Spec.Template.Spec
	if len(app.InitContainers) != 2 || app.InitContainers[0].Name != ContainerName || app.InitContainers[1].Name != "migrate" {
		t.Errorf("Deployment init containers: want kproxy first, then migrate: %+v", app.InitContainers)
	}
	if len(app.Volumes) != 2 || app.Volumes[1].Name != VolumeName || app.Volumes[1].ConfigMap.Name != "kproxy-config" {
		t.Errorf("Deployment volumes: %+v", app.Volumes)
	}
	tls := objs["StatefulSet/kafka-tls"].(*appsv1.StatefulSet).Spec.Template.Spec
	if len(tls.InitContainers) != 1 || !reflect.DeepEqual(tls.InitContainers[0], Sidecar(Defaults(), Asked{Listen: 9092, Upstream: 19092, Secret: "kafka-tls-cert"})) {
		t.Errorf("TLS StatefulSet init containers: %+v", tls.InitContainers)
	}
	if p := tlsProblems(tls, "kafka-tls-cert"); len(p) > 0 {
		t.Errorf("TLS StatefulSet: %v", p)
	}
	if p := tlsProblems(sts, ""); len(p) > 0 {
		t.Errorf("plaintext StatefulSet: %v", p)
	}
	if u := objs["Deployment/untouched"].(*appsv1.Deployment).Spec.Template.Spec; len(u.InitContainers) != 0 || len(u.Volumes) != 0 {
		t.Errorf("a Deployment without the annotation was changed: %+v", u)
	}
}

// A bad port annotation is an error naming it, and nothing is written.
func TestBadAnnotation(t *testing.T) {
	in := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n  annotations:\n    kproxy.io/inject: \"true\"\n    kproxy.io/listen-port: \"nine\"\nspec:\n  selector: {}\n  template:\n    spec:\n      containers: []\n")
	if _, err := Manifest(in, Defaults()); err == nil || !strings.Contains(err.Error(), "kproxy.io/listen-port") {
		t.Fatalf("err %v, want one naming kproxy.io/listen-port", err)
	}
	typo := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replicaz: 1\n")
	if _, err := Manifest(typo, Defaults()); err == nil || !strings.Contains(err.Error(), "replicaz") {
		t.Fatalf("err %v, want the unknown field named", err)
	}
}

// review posts an AdmissionReview for obj to the webhook.
func review(t *testing.T, h http.Handler, obj []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	in := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "uid-1", Object: runtime.RawExtension{Raw: obj}}}
	in.APIVersion, in.Kind = "admission.k8s.io/v1", "AdmissionReview"
	body, _ := json.Marshal(in)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/mutate", bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("response %s: %v", rec.Body, err)
	}
	if out.Response.UID != "uid-1" || !out.Response.Allowed || out.Kind != "AdmissionReview" {
		t.Fatalf("response %+v: want the request's uid, allowed", out.Response)
	}
	return out.Response
}

// The webhook's JSONPatch, applied to the object the API server sent,
// gives what kproxy-inject writes; an object that did not ask gets no
// patch, and a bad annotation is admitted unchanged with a warning.
func TestWebhook(t *testing.T) {
	h := Webhook(Defaults())
	in, _ := os.ReadFile("testdata/in.yaml")
	out, _ := os.ReadFile("testdata/out.yaml")
	ins, outs := bytes.Split(in, []byte("\n---")), bytes.Split(out, []byte("\n---"))
	if len(ins) != len(outs) {
		t.Fatalf("%d documents in, %d out", len(ins), len(outs))
	}
	for i := range ins { // every document, the Service too (no patch)
		raw, err := yaml.YAMLToJSON(ins[i])
		if err != nil {
			t.Fatal(err)
		}
		resp := review(t, h, raw)
		want, _ := yaml.YAMLToJSON(outs[i])
		got := raw
		if resp.Patch != nil {
			if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("document %d: patch type %v", i+1, resp.PatchType)
			}
			p, err := jsonpatchapply.DecodePatch(resp.Patch)
			if err != nil {
				t.Fatal(err)
			}
			if got, err = p.Apply(raw); err != nil {
				t.Fatal(err)
			}
		}
		if !jsonpatchapply.Equal(got, want) {
			t.Errorf("document %d: webhook result differs from kproxy-inject's:\n%s", i+1, got)
		}
	}
	bad := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","annotations":{"kproxy.io/inject":"true","kproxy.io/upstream-port":"0"}},"spec":{"template":{"spec":{"containers":[]}}}}`)
	if resp := review(t, h, bad); resp.Patch != nil || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "kproxy.io/upstream-port") {
		t.Errorf("bad annotation: %+v", resp)
	}
}

// The injector's sidecar is the one in examples/k8s (but for the port
// flags it adds), so the two cannot drift apart.
func TestSidecarMatchesExample(t *testing.T) {
	raw, err := os.ReadFile("../examples/k8s/kproxy-sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var patch appsv1.StatefulSet
	if err := yaml.UnmarshalStrict(raw, &patch); err != nil {
		t.Fatal(err)
	}
	want := patch.Spec.Template.Spec.InitContainers[0]
	got := Sidecar(Defaults(), Asked{Listen: 9092, Upstream: 19092})
	got.Args = want.Args
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.MarshalIndent(got, "", " ")
		wj, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("injector sidecar:\n%s\nexample sidecar:\n%s", gj, wj)
	}
}

// The webhook configuration example decodes strictly.
func TestWebhookConfiguration(t *testing.T) {
	raw, err := os.ReadFile("webhook.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, raw)
	var found bool
	for _, o := range objs {
		if m, ok := o.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
			found = true
			for _, w := range m.Webhooks {
				if w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil || *w.ClientConfig.Service.Path != "/mutate" {
					t.Errorf("webhook %s does not call /mutate", w.Name)
				}
			}
		}
	}
	if !found {
		t.Fatal("no MutatingWebhookConfiguration in webhook.yaml")
	}
}
