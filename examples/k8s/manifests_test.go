// Package k8s_test checks the Kubernetes examples against the Kubernetes
// API types and against kproxy's own configuration, so a manifest that
// kubectl would reject, or a sidecar wired to the wrong port, fails here.
package k8s_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"

	"github.com/kproxy/kproxy/config"
)

// objects decodes every document of file strictly (unknown or duplicate
// fields fail) into the API type its kind names.
func objects(t *testing.T, file string) []any {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s document %d: %v", file, i+1, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Pod":
			obj = &corev1.Pod{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "monitoring.coreos.com/v1 PrometheusRule":
			obj = &prometheusRule{} // observability_files_test.go
		default:
			t.Fatalf("%s document %d: unexpected %s %s", file, i+1, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", file, i+1, meta.Kind, err)
		}
		out = append(out, obj)
	}
	return out
}

// kustomization is the part of kustomization.yaml (or of a component's)
// used here; strict decoding makes any other field fail the test until it
// is checked too.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Components []string `json:"components"`
	Patches    []struct {
		Path   string `json:"path"`
		Target struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"target"`
	} `json:"patches"`
	ConfigMapGenerator []struct {
		Name  string   `json:"name"`
		Files []string `json:"files"`
	} `json:"configMapGenerator"`
}

// example is the kustomization's resources, decoded, with its patches
// applied as kustomize applies them (strategic merge).
type example struct {
	kust     kustomization
	kafka    *appsv1.StatefulSet
	services map[string]*corev1.Service
	jaeger   *appsv1.Deployment
	pods     map[string]*corev1.Pod
	// configMaps are the generated ConfigMaps: name, then key, then the
	// file it comes from (relative to this directory).
	configMaps map[string]map[string]string
}

// load builds the example as kustomize does, with the components listed in
// kustomization.yaml and the extra ones given (a directory each): the
// resources, then each component's resources, generators and patches,
// then the kustomization's own generators and patches. A component's patch
// therefore runs before kproxy-sidecar.yaml, which wins where both set a
// field.
func load(t *testing.T, components ...string) example {
	t.Helper()
	e := example{services: map[string]*corev1.Service{}, pods: map[string]*corev1.Pod{}, configMaps: map[string]map[string]string{}}
	e.kust = readKustomization(t, ".", "Kustomization", "kustomize.config.k8s.io/v1beta1")
	add := func(dir string, k kustomization) {
		for _, r := range k.Resources {
			for _, o := range objects(t, filepath.Join(dir, r)) {
				switch o := o.(type) {
				case *appsv1.StatefulSet:
					e.kafka = o
				case *appsv1.Deployment:
					e.jaeger = o
				case *corev1.Service:
					e.services[o.Name] = o
				case *corev1.Pod:
					e.pods[o.Name] = o
				}
			}
		}
	}
	generate := func(dir string, k kustomization) {
		for _, g := range k.ConfigMapGenerator {
			if e.configMaps[g.Name] != nil {
				t.Fatalf("%s: ConfigMap %s is generated twice; kustomize refuses that", dir, g.Name)
			}
			keys := map[string]string{}
			for _, f := range g.Files {
				key, file, ok := strings.Cut(f, "=")
				if !ok {
					key, file = filepath.Base(f), f
				}
				keys[key] = filepath.Join(dir, file)
			}
			e.configMaps[g.Name] = keys
		}
	}
	patch := func(dir string, k kustomization) {
		for _, p := range k.Patches {
			if p.Target.Kind != "StatefulSet" || p.Target.Name != e.kafka.Name {
				t.Fatalf("patch %s targets %s %s; want the StatefulSet %s", p.Path, p.Target.Kind, p.Target.Name, e.kafka.Name)
			}
			path := filepath.Join(dir, p.Path)
			objects(t, path) // strict: a misspelt field in the patch fails here
			e.kafka = patched(t, e.kafka, path)
		}
	}
	add(".", e.kust)
	if e.kafka == nil || e.jaeger == nil || e.services["kafka"] == nil || e.services["jaeger"] == nil {
		t.Fatalf("want the kafka StatefulSet and Service and the jaeger Deployment and Service")
	}
	for _, dir := range append(slices.Clone(e.kust.Components), components...) {
		c := readKustomization(t, dir, "Component", "kustomize.config.k8s.io/v1alpha1")
		add(dir, c)
		generate(dir, c)
		patch(dir, c)
	}
	generate(".", e.kust)
	patch(".", e.kust)
	return e
}

// readKustomization decodes dir/kustomization.yaml strictly and checks
// its kind.
func readKustomization(t *testing.T, dir, kind, apiVersion string) kustomization {
	t.Helper()
	file := filepath.Join(dir, "kustomization.yaml")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if k.Kind != kind || k.APIVersion != apiVersion {
		t.Fatalf("%s: %s %s, want %s %s", file, k.APIVersion, k.Kind, apiVersion, kind)
	}
	return k
}

// sidecarConfig is the file kproxy runs with: the one its --config names,
// through the ConfigMap volume mounted there (and that volume's items, if
// it picks keys), back to the file in this directory it is generated from.
func sidecarConfig(t *testing.T, e example) (file, mountDir string) {
	t.Helper()
	spec := e.kafka.Spec.Template.Spec
	kp := named(t, spec.InitContainers, "kproxy")
	if len(kp.Args) != 3 || kp.Args[0] != "run" || kp.Args[1] != "--config" {
		t.Fatalf("kproxy args %q, want run --config FILE", kp.Args)
	}
	for _, m := range kp.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, kp.Args[2])
		if err != nil || strings.HasPrefix(rel, "..") || strings.Contains(rel, "/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			key := rel
			if items := v.ConfigMap.Items; len(items) > 0 {
				key = ""
				for _, it := range items {
					if it.Path == rel {
						key = it.Key
					}
				}
			}
			keys, ok := e.configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("volume %s: ConfigMap %s is not generated here", v.Name, v.ConfigMap.Name)
			}
			if file, ok := keys[key]; ok {
				return file, m.MountPath
			}
			t.Fatalf("volume %s shows no %s from ConfigMap %s (keys %v)", v.Name, rel, v.ConfigMap.Name, keys)
		}
	}
	t.Fatalf("no ConfigMap volume mounted in kproxy holds %s", kp.Args[2])
	return "", ""
}

// patched applies the strategic-merge patch in file to obj (a
// StatefulSet or a Deployment).
func patched[T any](t *testing.T, obj *T, file string) *T {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var schema T
	merged, err := strategicpatch.StrategicMergePatch(orig, patch, schema)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	out := new(T)
	if err := json.Unmarshal(merged, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}

// Every manifest decodes strictly with the Kubernetes API types.
func TestManifestsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"tls", clientPodDir} {
		more, err := filepath.Glob(dir + "/*.yaml")
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	for _, f := range files {
		if b := filepath.Base(f); b == "kustomization.yaml" || b == "kproxy.yaml" {
			continue // not Kubernetes objects; checked below
		}
		if len(objects(t, f)) == 0 {
			t.Errorf("%s holds no objects", f)
		}
	}
	load(t)
	load(t, "tls")
	loadClientPod(t)
}

// The sidecar is wired to kproxy's own configuration: its ports, probes,
// config mount, OTEL environment and downward API, and the broker behind
// it listens where kproxy forwards and advertises kproxy's port.
func TestSidecarWiring(t *testing.T) {
	e := load(t)
	file, mountDir := sidecarConfig(t, e)
	if file != "kproxy.yaml" {
		t.Fatalf("kproxy runs with %s, want kproxy.yaml", file)
	}
	cfg, _, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	listen, admin, upstream := port(t, cfg.Proxy.Listen), port(t, cfg.Admin.Listen), port(t, cfg.Proxy.Upstream)

	spec := e.kafka.Spec.Template.Spec
	kp := named(t, spec.InitContainers, "kproxy")
	if kp.RestartPolicy == nil || *kp.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("kproxy is not a native sidecar (restartPolicy: Always)")
	}
	ports := map[string]int32{}
	for _, p := range kp.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if !slices.Contains(mapValues(ports), listen) || !slices.Contains(mapValues(ports), admin) {
		t.Errorf("container ports %v: kproxy.yaml listens on %d and admin on %d", ports, listen, admin)
	}
	probe := func(name string, pr *corev1.Probe, path string) {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET on %s", name, path)
			return
		}
		p := pr.HTTPGet.Port.IntVal
		if pr.HTTPGet.Port.StrVal != "" {
			p = ports[pr.HTTPGet.Port.StrVal]
		}
		if pr.HTTPGet.Path != path || p != admin {
			t.Errorf("%s probe: GET %s on port %d, want %s on the admin port %d", name, pr.HTTPGet.Path, p, path, admin)
		}
	}
	probe("startup", kp.StartupProbe, "/healthz")
	probe("liveness", kp.LivenessProbe, "/healthz")
	probe("readiness", kp.ReadinessProbe, "/readyz")

	if want := []string{"run", "--config", mountDir + "/kproxy.yaml"}; !slices.Equal(kp.Args, want) {
		t.Errorf("args %q, want %q", kp.Args, want)
	}

	env := map[string]corev1.EnvVar{}
	for _, v := range kp.Env {
		env[v.Name] = v
	}
	for name, field := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "NODE_NAME": "spec.nodeName"} {
		if v := env[name]; v.ValueFrom == nil || v.ValueFrom.FieldRef == nil || v.ValueFrom.FieldRef.FieldPath != field {
			t.Errorf("%s: want the downward API's %s", name, field)
		}
	}
	for name := range env {
		if strings.HasPrefix(name, "OTEL_") && !slices.Contains(otelVarsKproxyReads, name) {
			t.Errorf("%s: kproxy does not read this variable", name)
		}
	}
	attrs := env["OTEL_RESOURCE_ATTRIBUTES"].Value
	for _, want := range []string{"k8s.pod.name=$(POD_NAME)", "k8s.namespace.name=$(POD_NAMESPACE)", "k8s.node.name=$(NODE_NAME)"} {
		if !strings.Contains(attrs, want) {
			t.Errorf("OTEL_RESOURCE_ATTRIBUTES %q lacks %s", attrs, want)
		}
	}
	if got, want := env["OTEL_EXPORTER_OTLP_ENDPOINT"].Value, fmt.Sprintf("http://jaeger:%d", servicePort(t, e.services["jaeger"], "otlp-grpc")); got != want {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q, want %q (the jaeger Service's OTLP gRPC port)", got, want)
	}

	sc := kp.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("kproxy securityContext %+v: want non-root, read-only root, no privilege escalation, all capabilities dropped", sc)
	}
	if kp.Resources.Requests.Cpu().IsZero() || kp.Resources.Limits.Memory().IsZero() {
		t.Error("kproxy needs CPU requests and a memory limit")
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || float64(*g) <= cfg.Proxy.DrainTimeout.Seconds() {
		t.Errorf("terminationGracePeriodSeconds must exceed drain_timeout %v", cfg.Proxy.DrainTimeout)
	}
	ann := e.kafka.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(int(admin)) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("prometheus annotations %v: want scrape of /metrics on %d", ann, admin)
	}

	broker := named(t, spec.Containers, "kafka")
	benv := map[string]string{}
	for _, v := range broker.Env {
		benv[v.Name] = v.Value
	}
	if l := benv["KAFKA_LISTENERS"]; !strings.Contains(l, fmt.Sprintf("://127.0.0.1:%d", upstream)) {
		t.Errorf("KAFKA_LISTENERS %q: the broker must listen on 127.0.0.1:%d, kproxy's upstream", l, upstream)
	}
	if a := benv["KAFKA_ADVERTISED_LISTENERS"]; !strings.HasSuffix(a, fmt.Sprintf(":%d", listen)) || strings.Contains(a, ",") {
		t.Errorf("KAFKA_ADVERTISED_LISTENERS %q: advertise kproxy's port %d only, or clients bypass it", a, listen)
	}
	if sp := e.services["kafka"].Spec.Ports; len(sp) != 1 || sp[0].TargetPort.IntVal != listen {
		t.Errorf("kafka Service ports %+v: want one, targeting kproxy's %d", sp, listen)
	}
}

// The OTEL_* variables kproxy reads (tracing/env.go and the OpenTelemetry
// SDK's resource detection).
var otelVarsKproxyReads = []string{
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
	"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME",
	"OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
}

// named is the container called name in list.
func named(t *testing.T, list []corev1.Container, name string) *corev1.Container {
	t.Helper()
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	t.Fatalf("no container %q among %d", name, len(list))
	return nil
}

func servicePort(t *testing.T, s *corev1.Service, name string) int32 {
	t.Helper()
	for _, p := range s.Spec.Ports {
		if p.Name == name {
			return p.Port
		}
	}
	t.Fatalf("service %s has no port %s", s.Name, name)
	return 0
}

func mapValues(m map[string]int32) []int32 {
	var v []int32
	for _, x := range m {
		v = append(v, x)
	}
	return v
}

// kproxy validate accepts the ConfigMap's kproxy.yaml.
func TestKproxyValidate(t *testing.T) {
	out, err := exec.Command("go", "run", "github.com/kproxy/kproxy/cmd/kproxy", "validate", "--config", "kproxy.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kproxy.yaml: ok") {
		t.Fatalf("kproxy validate: %v\n%s", err, out)
	}
}
