package k8s_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kproxy/kproxy/config"
	"github.com/kproxy/kproxy/internal/testcerts"
)

// tlsSecret is the Secret README.md has the user create.
const tlsSecret = "kproxy-tls"

// secretKeys are the keys of a kubernetes.io/tls Secret (ca.crt as
// cert-manager adds it).
var secretKeys = []string{"tls.crt", "tls.key", "ca.crt"}

// secretMountProblems says what is wrong with how container c of spec
// gets the files in paths (all in one directory): they must come from a
// Secret volume mounted there whole, read-only, and name keys the volume
// shows.
func secretMountProblems(spec corev1.PodSpec, c *corev1.Container, paths ...string) []string {
	dir := filepath.Dir(paths[0])
	var out []string
	for _, p := range paths[1:] {
		if filepath.Dir(p) != dir {
			out = append(out, fmt.Sprintf("%s is not in %s with %s: one Secret volume holds them all", p, dir, paths[0]))
		}
	}
	var m *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == dir {
			m = &c.VolumeMounts[i]
		}
	}
	if m == nil {
		return append(out, fmt.Sprintf("container %s mounts nothing at %s, where the config's TLS files are", c.Name, dir))
	}
	if m.SubPath != "" || m.SubPathExpr != "" {
		out = append(out, fmt.Sprintf("volume %s is mounted at %s with subPath %q: a subPath mount is fixed when the container starts, "+
			"so when the Secret is renewed (the kubelet swaps the volume's ..data symlink) kproxy never sees the new certificate; mount the volume whole",
			m.Name, dir, m.SubPath+m.SubPathExpr))
	}
	if !m.ReadOnly {
		out = append(out, fmt.Sprintf("volume %s at %s is not read-only: kproxy only reads its certificate", m.Name, dir))
	}
	var src *corev1.SecretVolumeSource
	for _, v := range spec.Volumes {
		if v.Name == m.Name {
			src = v.Secret
		}
	}
	if src == nil {
		return append(out, fmt.Sprintf("volume %s at %s is not a Secret volume", m.Name, dir))
	}
	if src.SecretName != tlsSecret {
		out = append(out, fmt.Sprintf("Secret volume %s is %q, want %q as README.md creates it", m.Name, src.SecretName, tlsSecret))
	}
	shown := secretKeys
	if len(src.Items) > 0 {
		shown = nil
		for _, it := range src.Items {
			shown = append(shown, it.Path)
		}
	}
	for _, p := range paths {
		if !slices.Contains(shown, filepath.Base(p)) {
			out = append(out, fmt.Sprintf("%s: the Secret volume shows %v", p, shown))
		}
	}
	return out
}

// The tls component: kproxy's config names files of the kproxy-tls Secret,
// mounted whole (no subPath), read-only, where the config says; the config
// is the plaintext one plus its tls: section; and the client Pod trusts the
// Secret's CA.
func TestTLSComponent(t *testing.T) {
	e := load(t, "tls")
	file, _ := sidecarConfig(t, e)
	if file != filepath.Join("tls", "kproxy.yaml") {
		t.Fatalf("with the tls component kproxy runs with %s, want tls/kproxy.yaml", file)
	}
	cfg, _, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.TLS.Listener
	if l == nil || cfg.TLS.Upstream != nil {
		t.Fatalf("%s: want tls.listener only (the broker behind is plaintext in the pod)", file)
	}
	paths := []string{l.CertFile, l.KeyFile}
	if l.ClientCAFile != "" {
		paths = append(paths, l.ClientCAFile)
	}
	spec := e.kafka.Spec.Template.Spec
	kp := named(t, spec.InitContainers, "kproxy")
	for _, p := range secretMountProblems(spec, kp, paths...) {
		t.Error(p)
	}
	// Commented out, but it must work once uncommented.
	if p := secretMountProblems(spec, kp, l.CertFile, "/etc/kproxy/tls/ca.crt"); len(p) > 0 {
		t.Errorf("the commented client_ca_file: %v", p)
	}

	plain, _, err := config.Load("kproxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLS = plain.TLS
	if !reflect.DeepEqual(cfg, plain) {
		t.Errorf("%s differs from kproxy.yaml in more than its tls: section:\n%+v\n%+v", file, cfg, plain)
	}

	client := e.pods["kafka-tls-client"]
	if client == nil {
		t.Fatal("the tls component has no kafka-tls-client Pod")
	}
	props, err := os.ReadFile(e.configMaps["kafka-tls-client"]["client.properties"])
	if err != nil {
		t.Fatal(err)
	}
	var truststore string
	for _, line := range strings.Split(string(props), "\n") {
		if v, ok := strings.CutPrefix(line, "ssl.truststore.location="); ok {
			truststore = v
		}
	}
	if !strings.Contains(string(props), "security.protocol=SSL") || truststore == "" {
		t.Fatalf("client.properties: want security.protocol=SSL and ssl.truststore.location:\n%s", props)
	}
	cspec := client.Spec
	cspec.InitContainers = nil
	for _, p := range secretMountProblems(cspec, &cspec.Containers[0], truststore) {
		t.Errorf("kafka-tls-client: %s", p)
	}
}

// The mount check fails a subPath mount (saying why), a writable one, one
// that is not a Secret, and a path the volume does not show, so
// TestTLSComponent can fail.
func TestSecretMountProblems(t *testing.T) {
	e := load(t, "tls")
	good := e.kafka.Spec.Template.Spec
	crt, key := "/etc/kproxy/tls/tls.crt", "/etc/kproxy/tls/tls.key"
	if p := secretMountProblems(good, named(t, good.InitContainers, "kproxy"), crt, key); len(p) > 0 {
		t.Fatalf("the component itself: %v", p)
	}
	for name, c := range map[string]struct {
		change func(*corev1.PodSpec, *corev1.Container)
		want   string
	}{
		"subPath": {func(_ *corev1.PodSpec, k *corev1.Container) {
			k.VolumeMounts[len(k.VolumeMounts)-1].SubPath = "tls.crt"
		}, "never sees the new certificate"},
		"writable": {func(_ *corev1.PodSpec, k *corev1.Container) {
			k.VolumeMounts[len(k.VolumeMounts)-1].ReadOnly = false
		}, "not read-only"},
		"emptyDir": {func(s *corev1.PodSpec, _ *corev1.Container) {
			s.Volumes[len(s.Volumes)-1].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
		}, "not a Secret volume"},
		"items": {func(s *corev1.PodSpec, _ *corev1.Container) {
			s.Volumes[len(s.Volumes)-1].Secret.Items = []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}}
		}, "tls.key: the Secret volume shows"},
		"elsewhere": {func(_ *corev1.PodSpec, k *corev1.Container) {
			k.VolumeMounts[len(k.VolumeMounts)-1].MountPath = "/etc/tls"
		}, "mounts nothing at /etc/kproxy/tls"},
	} {
		spec := *good.DeepCopy()
		kp := named(t, spec.InitContainers, "kproxy")
		if m := kp.VolumeMounts[len(kp.VolumeMounts)-1]; m.Name != spec.Volumes[len(spec.Volumes)-1].Name {
			t.Fatalf("want the Secret's mount and volume last: %s, %s", m.Name, spec.Volumes[len(spec.Volumes)-1].Name)
		}
		c.change(&spec, kp)
		p := strings.Join(secretMountProblems(spec, kp, crt, key), "\n")
		if !strings.Contains(p, c.want) {
			t.Errorf("%s: problems %q, want one saying %q", name, p, c.want)
		}
	}
}

// kproxy validate accepts tls/kproxy.yaml with real certificate files at
// its paths (in a directory laid out as the kubelet lays out a Secret
// volume), with mTLS uncommented too, and refuses a key that does not
// match: validate loads the files.
func TestKproxyValidateTLS(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kproxy")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/kproxy/kproxy/cmd/kproxy").CombinedOutput(); err != nil {
		t.Fatalf("go build kproxy: %v\n%s", err, out)
	}
	raw, err := os.ReadFile("tls/kproxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ca := testcerts.NewCA(t, "kproxy example CA")
	server := ca.Server(t)
	good := testcerts.NewSecretDir(t, testcerts.Files(server, ca))
	bad := testcerts.NewSecretDir(t, testcerts.Files(server.WithOtherKey(t), ca))

	mtls := strings.NewReplacer("# client_ca_file:", "client_ca_file:", "# client_auth:", "client_auth:").Replace(string(raw))
	if strings.Count(mtls, "\n    client_ca_file: /etc/kproxy/tls/ca.crt\n    client_auth: require\n") != 1 {
		t.Fatalf("tls/kproxy.yaml: want the commented mTLS lines under tls.listener:\n%s", raw)
	}
	for _, c := range []struct {
		name, body string
		dir        *testcerts.SecretDir
		ok         bool
	}{
		{"as shipped", string(raw), good, true},
		{"mTLS uncommented", mtls, good, true},
		{"key not matching", string(raw), bad, false},
	} {
		body := strings.ReplaceAll(c.body, "/etc/kproxy/tls/", c.dir.Dir+"/")
		if strings.Count(body, c.dir.Dir) < 2 {
			t.Fatalf("%s: tls/kproxy.yaml names no files in /etc/kproxy/tls/", c.name)
		}
		path := filepath.Join(t.TempDir(), "kproxy.yaml")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "validate", "--config", path).CombinedOutput()
		switch {
		case c.ok && (err != nil || !strings.Contains(string(out), "kproxy.yaml: ok")):
			t.Errorf("%s: kproxy validate: %v\n%s", c.name, err, out)
		case !c.ok && (err == nil || !strings.Contains(string(out), "listener.key_file")):
			t.Errorf("%s: kproxy validate: %v, want a failure naming listener.key_file\n%s", c.name, err, out)
		}
	}
}
