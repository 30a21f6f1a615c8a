package k8s_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// clientPodDir is the client-pod example: kproxy in an application's pod,
// in front of a whole cluster.
const clientPodDir = "client-pod"

// clientPod is the client-pod kustomization built as kustomize builds it:
// its Deployment with the sidecar patch applied, and its generated
// ConfigMaps (name, then key, then the file it comes from).
type clientPod struct {
	app        *appsv1.Deployment
	configMaps map[string]map[string]string
}

func loadClientPod(t *testing.T) clientPod {
	t.Helper()
	k := readKustomization(t, clientPodDir, "Kustomization", "kustomize.config.k8s.io/v1beta1")
	c := clientPod{configMaps: map[string]map[string]string{}}
	for _, r := range k.Resources {
		for _, o := range objects(t, filepath.Join(clientPodDir, r)) {
			d, ok := o.(*appsv1.Deployment)
			if !ok || c.app != nil {
				t.Fatalf("%s: want one Deployment, the application, and nothing else", r)
			}
			c.app = d
		}
	}
	if c.app == nil || len(k.Components) > 0 {
		t.Fatalf("%s/kustomization.yaml: want the application's Deployment and no components", clientPodDir)
	}
	for _, g := range k.ConfigMapGenerator {
		keys := map[string]string{}
		for _, f := range g.Files {
			key, file, ok := strings.Cut(f, "=")
			if !ok {
				key, file = filepath.Base(f), f
			}
			keys[key] = filepath.Join(clientPodDir, file)
		}
		c.configMaps[g.Name] = keys
	}
	for _, p := range k.Patches {
		if p.Target.Kind != "Deployment" || p.Target.Name != c.app.Name {
			t.Fatalf("patch %s targets %s %s; want the Deployment %s", p.Path, p.Target.Kind, p.Target.Name, c.app.Name)
		}
		path := filepath.Join(clientPodDir, p.Path)
		objects(t, path) // strict: a misspelt field in the patch fails here
		c.app = patched(t, c.app, path)
	}
	return c
}

// clientConfig is the part of the client pod's kproxy.yaml its wiring
// depends on.
type clientConfig struct {
	Proxy struct {
		Listen       string `json:"listen"`
		Upstream     string `json:"upstream"`
		DrainTimeout string `json:"drain_timeout"`
	} `json:"proxy"`
	Cluster *struct {
		NodePortBase int `json:"node_port_base"`
		NodeIDs      struct {
			Min int `json:"min"`
			Max int `json:"max"`
		} `json:"node_ids"`
		AdvertisedHost string `json:"advertised_host"`
	} `json:"cluster"`
	Admin struct {
		Listen string `json:"listen"`
	} `json:"admin"`
	SASL *struct {
		Upstream *saslUpstream `json:"upstream"`
	} `json:"sasl"`
}

// The client pod is wired to its kproxy.yaml: kproxy is a native sidecar
// reading that file from the ConfigMap; its Kafka listeners (bootstrap
// and every node port) are on loopback, apart from each other and from
// the admin port the probes and Prometheus use; and the application knows
// only the bootstrap listener, never an address of the cluster.
func TestClientPodWiring(t *testing.T) {
	c := loadClientPod(t)
	spec := c.app.Spec.Template.Spec
	kp := named(t, spec.InitContainers, "kproxy")
	if kp.RestartPolicy == nil || *kp.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("kproxy is not a native sidecar (restartPolicy: Always)")
	}
	if want := []string{"run", "--config", "/etc/kproxy/kproxy.yaml"}; !slices.Equal(kp.Args, want) {
		t.Fatalf("args %q, want %q", kp.Args, want)
	}
	file := configMapFile(t, spec, kp, c.configMaps)
	if file != filepath.Join(clientPodDir, "kproxy.yaml") {
		t.Fatalf("kproxy runs with %s, want %s/kproxy.yaml", file, clientPodDir)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg clientConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster == nil {
		t.Fatalf("%s has no cluster: section; without it kproxy fronts one broker only", file)
	}
	host, _, err := net.SplitHostPort(cfg.Proxy.Listen)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("proxy.listen %q: want a loopback address, for the pod's own containers", cfg.Proxy.Listen)
	}
	if h := cfg.Cluster.AdvertisedHost; h != "" && h != host {
		t.Errorf("cluster.advertised_host %q: the application reaches the node listeners on %s", h, host)
	}
	listen, admin := port(t, cfg.Proxy.Listen), port(t, cfg.Admin.Listen)
	first := int32(cfg.Cluster.NodePortBase)
	last := first + int32(cfg.Cluster.NodeIDs.Max-cfg.Cluster.NodeIDs.Min)
	if cfg.Cluster.NodeIDs.Max < cfg.Cluster.NodeIDs.Min || last > 65535 {
		t.Errorf("node ports %d-%d", first, last)
	}
	for name, p := range map[string]int32{"proxy.listen": listen, "admin.listen": admin} {
		if p >= first && p <= last {
			t.Errorf("%s port %d is among the node ports %d-%d", name, p, first, last)
		}
	}
	if listen == admin {
		t.Errorf("proxy.listen and admin.listen share port %d", listen)
	}

	ports := map[string]int32{}
	for _, p := range kp.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["kproxy-admin"] != admin {
		t.Errorf("container ports %v: admin listens on %d", ports, admin)
	}
	for _, pr := range []*corev1.Probe{kp.StartupProbe, kp.LivenessProbe, kp.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil || ports[pr.HTTPGet.Port.StrVal] != admin {
			t.Errorf("probe %+v: want an HTTP GET on the admin port %d", pr, admin)
		}
	}
	if kp.ReadinessProbe == nil || kp.ReadinessProbe.HTTPGet == nil || kp.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("readiness probe: want /readyz, which waits for the cluster's bootstrap")
	}
	ann := c.app.Spec.Template.Annotations
	if ann["prometheus.io/port"] != strconv.Itoa(int(admin)) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("prometheus annotations %v: want /metrics on %d", ann, admin)
	}
	grace := int64(30) // the API server's default
	if g := spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	drain, err := time.ParseDuration(cfg.Proxy.DrainTimeout)
	if err != nil || float64(grace) <= drain.Seconds() {
		t.Errorf("drain_timeout %q must be shorter than terminationGracePeriodSeconds %d", cfg.Proxy.DrainTimeout, grace)
	}

	// The application: bootstraps from kproxy, and names no other Kafka
	// address (it would bypass kproxy).
	app := named(t, spec.Containers, "app")
	words := slices.Concat(app.Command, app.Args)
	for _, e := range app.Env {
		words = append(words, e.Value)
	}
	upHost, _, _ := net.SplitHostPort(cfg.Proxy.Upstream)
	var boot bool
	for _, w := range words {
		if strings.Contains(w, "bootstrap.servers=") {
			boot = true
			if got := strings.SplitN(w, "=", 2)[1]; got != cfg.Proxy.Listen {
				t.Errorf("the application bootstraps from %q, want kproxy's %s", got, cfg.Proxy.Listen)
			}
		}
		if upHost != "" && strings.Contains(w, upHost) {
			t.Errorf("the application names the cluster's %s (%q): it would bypass kproxy", upHost, w)
		}
	}
	if !boot {
		t.Errorf("the application's command %q sets no bootstrap.servers", words)
	}
	if !slices.ContainsFunc(kp.Env, func(v corev1.EnvVar) bool { return v.Name == "OTEL_EXPORTER_OTLP_ENDPOINT" }) {
		t.Error("no OTEL_EXPORTER_OTLP_ENDPOINT: the application's requests would not be traced")
	}
	sc := kp.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("kproxy securityContext %+v: want non-root, read-only root", sc)
	}
}

// configMapFile is the file in this directory the sidecar's --config
// comes from, through the ConfigMap volume mounted there.
func configMapFile(t *testing.T, spec corev1.PodSpec, kp *corev1.Container, configMaps map[string]map[string]string) string {
	t.Helper()
	for _, m := range kp.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, kp.Args[2])
		if err != nil || strings.HasPrefix(rel, "..") || strings.Contains(rel, "/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			keys, ok := configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("volume %s: ConfigMap %s is not generated here", v.Name, v.ConfigMap.Name)
			}
			if len(v.ConfigMap.Items) > 0 {
				t.Fatalf("volume %s picks keys; the example shows the ConfigMap whole", v.Name)
			}
			if file, ok := keys[rel]; ok {
				return file
			}
			t.Fatalf("volume %s shows no %s from ConfigMap %s (keys %v)", v.Name, rel, v.ConfigMap.Name, keys)
		}
	}
	t.Fatalf("no ConfigMap volume mounted in kproxy holds %s", kp.Args[2])
	return ""
}

// kproxy validate accepts the client pod's kproxy.yaml, with its SASL
// credentials files where the config names them (a directory holding
// the Secret's keys as files), without printing the password; and
// refuses it without the password file, and with its node ports moved
// over the admin port (so the check can fail).
func TestClientPodKproxyValidate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kproxy")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/kproxy/kproxy/cmd/kproxy").CombinedOutput(); err != nil {
		t.Fatalf("go build kproxy: %v\n%s", err, out)
	}
	file := filepath.Join(clientPodDir, "kproxy.yaml")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const password = "s3cret-never-printed"
	creds := t.TempDir()
	for k, v := range map[string]string{"username": "app", "password": password} {
		if err := os.WriteFile(filepath.Join(creds, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	body := strings.ReplaceAll(string(raw), "/etc/kproxy/sasl/", creds+"/")
	if strings.Count(body, creds) < 2 {
		t.Fatalf("%s names no credentials files in /etc/kproxy/sasl/", file)
	}
	good := filepath.Join(t.TempDir(), "kproxy.yaml")
	if err := os.WriteFile(good, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "validate", "--config", good).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kproxy.yaml: ok") {
		t.Fatalf("kproxy validate %s: %v\n%s", file, err, out)
	}
	if strings.Contains(string(out), password) {
		t.Errorf("kproxy validate printed the password:\n%s", out)
	}
	// validate reads the files: a Secret without the password fails.
	if err := os.Remove(filepath.Join(creds, "password")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "validate", "--config", good).CombinedOutput(); err == nil || !strings.Contains(string(out), "password_file") {
		t.Errorf("kproxy validate with no password file: %v, want a failure naming password_file\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(creds, "password"), []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(body, "node_port_base: 9100", "node_port_base: 9250", 1)
	if bad == body {
		t.Fatalf("%s: no node_port_base: 9100 to move", file)
	}
	badFile := filepath.Join(t.TempDir(), "kproxy.yaml")
	if err := os.WriteFile(badFile, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "validate", "--config", badFile).CombinedOutput(); err == nil {
		t.Errorf("kproxy validate took node ports 9250-9349 with admin on 9290:\n%s", out)
	} else if !strings.Contains(string(out), "cluster") {
		t.Errorf("kproxy validate refused node ports over the admin port without naming the cluster section:\n%s", out)
	}
}
