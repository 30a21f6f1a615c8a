package k8s_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// saslSecretFile is the example Secret the client pod's kproxy
// authenticates with; the user fills it in and applies it.
const saslSecretFile = "client-pod/sasl-secret.yaml"

// saslUpstream is kproxy.yaml's sasl.upstream.
type saslUpstream struct {
	Mechanism    string `json:"mechanism"`
	UsernameFile string `json:"username_file"`
	PasswordFile string `json:"password_file"`
	TokenFile    string `json:"token_file"`
}

// files are the files the mechanism reads, and an error if others are set
// or some are missing.
func (u saslUpstream) files() ([]string, error) {
	switch u.Mechanism {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if u.UsernameFile == "" || u.PasswordFile == "" || u.TokenFile != "" {
			return nil, fmt.Errorf("%s: want username_file and password_file, and no token_file", u.Mechanism)
		}
		return []string{u.UsernameFile, u.PasswordFile}, nil
	case "OAUTHBEARER":
		if u.TokenFile == "" || u.UsernameFile != "" || u.PasswordFile != "" {
			return nil, fmt.Errorf("%s: want token_file only", u.Mechanism)
		}
		return []string{u.TokenFile}, nil
	}
	return nil, fmt.Errorf("mechanism %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", u.Mechanism)
}

// saslMountProblems says what is wrong with how the sidecar kp of spec
// gets the credentials files in paths (all in one directory): they must
// come from the Secret secret's volume, mounted there whole (no subPath:
// it would never see a rotated Secret) and read-only, in kproxy alone,
// each path a key of the Secret.
func saslMountProblems(spec corev1.PodSpec, kp *corev1.Container, secret *corev1.Secret, paths ...string) []string {
	var out []string
	dir := filepath.Dir(paths[0])
	for _, p := range paths[1:] {
		if filepath.Dir(p) != dir {
			out = append(out, fmt.Sprintf("%s is not in %s with %s: one Secret volume holds them all", p, dir, paths[0]))
		}
	}
	var m *corev1.VolumeMount
	for i := range kp.VolumeMounts {
		if kp.VolumeMounts[i].MountPath == dir {
			m = &kp.VolumeMounts[i]
		}
	}
	if m == nil {
		return append(out, fmt.Sprintf("kproxy mounts nothing at %s, where sasl.upstream's files are", dir))
	}
	if m.SubPath != "" || m.SubPathExpr != "" {
		out = append(out, fmt.Sprintf("volume %s is mounted with subPath %q: a subPath mount never sees a rotated Secret; mount it whole", m.Name, m.SubPath+m.SubPathExpr))
	}
	if !m.ReadOnly {
		out = append(out, fmt.Sprintf("volume %s at %s is not read-only", m.Name, dir))
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if c.Name == kp.Name {
			continue
		}
		for _, cm := range c.VolumeMounts {
			if cm.Name == m.Name {
				out = append(out, fmt.Sprintf("container %s mounts the credentials too; only kproxy should hold them", c.Name))
			}
		}
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
	if src.SecretName != secret.Name {
		out = append(out, fmt.Sprintf("Secret volume %s shows %q, want %q (%s)", m.Name, src.SecretName, secret.Name, saslSecretFile))
	}
	if len(src.Items) > 0 {
		out = append(out, fmt.Sprintf("Secret volume %s picks keys; show the Secret whole", m.Name))
	}
	for _, p := range paths {
		key := filepath.Base(p)
		_, s := secret.StringData[key]
		_, d := secret.Data[key]
		if !s && !d {
			out = append(out, fmt.Sprintf("%s: the Secret %s has no key %s", p, secret.Name, key))
		}
	}
	return out
}

// saslSecret decodes the example Secret strictly.
func saslSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	objs := objects(t, saslSecretFile)
	s, ok := objs[0].(*corev1.Secret)
	if len(objs) != 1 || !ok {
		t.Fatalf("%s: want one Secret", saslSecretFile)
	}
	return s
}

// The client pod authenticates to the cluster: its kproxy.yaml's
// sasl.upstream names, for its mechanism, files of the example Secret,
// which only the sidecar mounts, whole and read-only, where the config
// says; the Secret's values are marked placeholders; and the application
// is configured with no SASL at all.
func TestClientPodSASL(t *testing.T) {
	c := loadClientPod(t)
	spec := c.app.Spec.Template.Spec
	kp := named(t, spec.InitContainers, "kproxy")
	file := configMapFile(t, spec, kp, c.configMaps)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg clientConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.SASL == nil || cfg.SASL.Upstream == nil {
		t.Fatalf("%s has no sasl.upstream: the client pod would not authenticate", file)
	}
	paths, err := cfg.SASL.Upstream.files()
	if err != nil {
		t.Fatalf("%s: sasl.upstream: %v", file, err)
	}
	secret := saslSecret(t)
	for _, p := range saslMountProblems(spec, kp, secret, paths...) {
		t.Error(p)
	}
	if len(secret.Data)+len(secret.StringData) != len(paths) {
		t.Errorf("%s: keys %v %v, want only those sasl.upstream reads (%v)", saslSecretFile, secret.StringData, secret.Data, paths)
	}
	for k, v := range secret.StringData {
		if !strings.HasPrefix(v, "REPLACE-ME") {
			t.Errorf("%s: %s is %q, want a value marked REPLACE-ME, never a real-looking credential", saslSecretFile, k, v)
		}
	}

	app := named(t, spec.Containers, "app")
	for _, w := range slices.Concat(app.Command, app.Args) {
		if strings.Contains(strings.ToLower(w), "sasl") {
			t.Errorf("the application's command sets %q; kproxy authenticates for it", w)
		}
	}
	for _, e := range app.Env {
		if strings.Contains(strings.ToLower(e.Name+e.Value), "sasl") {
			t.Errorf("the application's environment sets %s; kproxy authenticates for it", e.Name)
		}
	}
}

// The mount check fails each way the credentials could be wired wrong, so
// TestClientPodSASL can fail.
func TestSASLMountProblems(t *testing.T) {
	secret := &corev1.Secret{StringData: map[string]string{"username": "u", "password": "p"}}
	secret.Name = "creds"
	paths := []string{"/etc/kproxy/sasl/username", "/etc/kproxy/sasl/password"}
	good := func() (corev1.PodSpec, *corev1.Container) {
		spec := corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "kproxy", VolumeMounts: []corev1.VolumeMount{{Name: "kproxy-sasl", MountPath: "/etc/kproxy/sasl", ReadOnly: true}}}},
			Containers:     []corev1.Container{{Name: "app"}},
			Volumes:        []corev1.Volume{{Name: "kproxy-sasl", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}},
		}
		return spec, &spec.InitContainers[0]
	}
	if spec, kp := good(); len(saslMountProblems(spec, kp, secret, paths...)) > 0 {
		t.Fatalf("the good wiring: %v", saslMountProblems(spec, kp, secret, paths...))
	}
	for _, c := range []struct {
		name   string
		mutate func(spec *corev1.PodSpec)
		paths  []string
		want   string
	}{
		{"subPath", func(s *corev1.PodSpec) { s.InitContainers[0].VolumeMounts[0].SubPath = "username" }, paths, "never sees a rotated Secret"},
		{"writable", func(s *corev1.PodSpec) { s.InitContainers[0].VolumeMounts[0].ReadOnly = false }, paths, "not read-only"},
		{"another Secret", func(s *corev1.PodSpec) { s.Volumes[0].Secret.SecretName = "other" }, paths, `want "creds"`},
		{"not a Secret", func(s *corev1.PodSpec) { s.Volumes[0].Secret = nil }, paths, "not a Secret volume"},
		{"picked keys", func(s *corev1.PodSpec) {
			s.Volumes[0].Secret.Items = []corev1.KeyToPath{{Key: "username", Path: "username"}}
		}, paths, "picks keys"},
		{"the app mounts it", func(s *corev1.PodSpec) {
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kproxy-sasl", MountPath: "/creds"}}
		}, paths, "container app mounts the credentials"},
		{"mounted elsewhere", func(s *corev1.PodSpec) { s.InitContainers[0].VolumeMounts[0].MountPath = "/sasl" }, paths, "mounts nothing at /etc/kproxy/sasl"},
		{"a key the Secret lacks", func(*corev1.PodSpec) {}, []string{"/etc/kproxy/sasl/token"}, "has no key token"},
		{"files in two directories", func(*corev1.PodSpec) {}, []string{"/etc/kproxy/sasl/username", "/etc/password"}, "one Secret volume holds them all"},
	} {
		spec, kp := good()
		c.mutate(&spec)
		p := saslMountProblems(spec, kp, secret, c.paths...)
		if !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s: problems %q, want one with %q", c.name, p, c.want)
		}
	}
}
