package inject

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// tlsProblems says how the pod spec's TLS wiring differs from what
// secret asks ("" for none): the Secret volume, its mount in the sidecar
// (whole, read-only, at TLSDir) and the sidecar's --tls-cert/--tls-key.
func tlsProblems(spec corev1.PodSpec, secret string) []string {
	var out []string
	var kp *corev1.Container
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == ContainerName {
			kp = &spec.InitContainers[i]
		}
	}
	if kp == nil {
		return []string{"no kproxy init container"}
	}
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == TLSVolumeName {
			vol = &spec.Volumes[i]
		}
	}
	var mount *corev1.VolumeMount
	for i := range kp.VolumeMounts {
		if kp.VolumeMounts[i].Name == TLSVolumeName {
			mount = &kp.VolumeMounts[i]
		}
	}
	args := strings.Join(kp.Args, " ")
	wantArgs := "--tls-cert " + TLSDir + "/tls.crt --tls-key " + TLSDir + "/tls.key"
	if secret == "" {
		if vol != nil || mount != nil || strings.Contains(args, "--tls-") {
			out = append(out, fmt.Sprintf("no TLS asked, yet volume %v, mount %v, args %q", vol, mount, args))
		}
		return out
	}
	switch {
	case vol == nil || vol.Secret == nil:
		out = append(out, fmt.Sprintf("volume %s: %+v, want the Secret %s", TLSVolumeName, vol, secret))
	case vol.Secret.SecretName != secret || len(vol.Secret.Items) > 0:
		out = append(out, fmt.Sprintf("volume %s: %+v, want all of the Secret %s", TLSVolumeName, vol.Secret, secret))
	}
	switch {
	case mount == nil:
		out = append(out, "the sidecar does not mount the TLS Secret")
	case mount.SubPath != "" || mount.SubPathExpr != "":
		out = append(out, "the TLS Secret is mounted with subPath: a subPath mount never sees the kubelet's update of a renewed Secret, so kproxy would keep the old certificate")
	case mount.MountPath != TLSDir || !mount.ReadOnly:
		out = append(out, fmt.Sprintf("mount %+v, want %s read-only", mount, TLSDir))
	}
	if !strings.HasSuffix(args, wantArgs) {
		out = append(out, fmt.Sprintf("args %q, want them to end %q", args, wantArgs))
	}
	return out
}

// docs splits a manifest into its documents.
func docs(m []byte) [][]byte { return bytes.Split(m, []byte("\n---")) }

// throughBoth injects doc with kproxy-inject and with the webhook, fails
// the test unless they agree, and returns the pod spec.
func throughBoth(t *testing.T, doc []byte) corev1.PodSpec {
	t.Helper()
	cli, err := Manifest(doc, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	got := raw
	if resp := review(t, Webhook(Defaults()), raw); resp.Patch != nil {
		p, err := jsonpatchapply.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = p.Apply(raw); err != nil {
			t.Fatal(err)
		}
	}
	want, err := yaml.YAMLToJSON(cli)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonpatchapply.Equal(got, want) {
		t.Fatalf("the webhook and kproxy-inject differ:\nwebhook: %s\ncli:     %s", got, want)
	}
	var sts appsv1.StatefulSet
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict(cli, &sts); err == nil && sts.Kind == "StatefulSet" {
		return sts.Spec.Template.Spec
	}
	if err := yaml.UnmarshalStrict(cli, &dep); err != nil {
		t.Fatal(err)
	}
	return dep.Spec.Template.Spec
}

// Turning TLS on for a workload injected before adds the Secret volume
// after the user's, and turning it off again removes the volume, the mount
// and the flags; kproxy-inject and the webhook agree each time.
func TestTLSSecretOnAndOff(t *testing.T) {
	out, err := os.ReadFile("testdata/out.yaml")
	if err != nil {
		t.Fatal(err)
	}
	app := docs(out)[1] // the Deployment with a volume of its own, injected
	if !bytes.Contains(app, []byte("name: app\n")) {
		t.Fatalf("want the app Deployment second in testdata/out.yaml:\n%s", app)
	}
	on := bytes.Replace(app, []byte(`    kproxy.io/inject: "true"`), []byte("    kproxy.io/inject: \"true\"\n    kproxy.io/tls-secret: app-tls"), 1)
	if bytes.Equal(on, app) {
		t.Fatal("could not annotate the app Deployment")
	}
	spec := throughBoth(t, on)
	if p := tlsProblems(spec, "app-tls"); len(p) > 0 {
		t.Errorf("TLS turned on: %v", p)
	}
	var names []string
	for _, v := range spec.Volumes {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"scratch", VolumeName, TLSVolumeName}) {
		t.Errorf("volumes %v: want the user's first, then kproxy's", names)
	}

	tls := docs(out)[3]
	if !bytes.Contains(tls, []byte("name: kafka-tls\n")) {
		t.Fatalf("want the kafka-tls StatefulSet fourth in testdata/out.yaml:\n%s", tls)
	}
	off := bytes.Replace(tls, []byte("        kproxy.io/tls-secret: kafka-tls-cert\n"), nil, 1)
	if bytes.Equal(off, tls) {
		t.Fatal("could not remove the annotation")
	}
	if p := tlsProblems(throughBoth(t, off), ""); len(p) > 0 {
		t.Errorf("TLS turned off: %v", p)
	}
}

// A tls-secret that cannot be a Secret's name is an error naming the
// annotation for kproxy-inject, and a warning with no patch from the
// webhook.
func TestBadTLSSecret(t *testing.T) {
	for _, name := range []string{"", "Kafka_TLS", strings.Repeat("a", 254)} {
		in := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n  annotations:\n    kproxy.io/inject: \"true\"\n    kproxy.io/tls-secret: \"" + name + "\"\nspec:\n  selector: {}\n  template:\n    spec:\n      containers: []\n")
		if _, err := Manifest(in, Defaults()); err == nil || !strings.Contains(err.Error(), AnnotationTLSSecret) {
			t.Errorf("%q: err %v, want one naming %s", name, err, AnnotationTLSSecret)
		}
		raw, _ := yaml.YAMLToJSON(in)
		if resp := review(t, Webhook(Defaults()), raw); resp.Patch != nil || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], AnnotationTLSSecret) {
			t.Errorf("%q: webhook %+v, want no patch and a warning naming %s", name, resp, AnnotationTLSSecret)
		}
	}
}

// The injected TLS wiring is the example's tls component: the same
// volume name and mount, and the files its kproxy.yaml names are the
// ones the injected flags name.
func TestTLSMatchesExample(t *testing.T) {
	raw, err := os.ReadFile("../examples/k8s/tls/kproxy-sidecar-tls.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var patch appsv1.StatefulSet
	if err := yaml.UnmarshalStrict(raw, &patch); err != nil {
		t.Fatal(err)
	}
	var want *corev1.VolumeMount
	for _, m := range patch.Spec.Template.Spec.InitContainers[0].VolumeMounts {
		if m.Name == TLSVolumeName {
			want = &m
		}
	}
	got := Sidecar(Defaults(), Asked{Listen: 9092, Upstream: 19092, Secret: "kproxy-tls"})
	if want == nil || !reflect.DeepEqual(got.VolumeMounts[len(got.VolumeMounts)-1], *want) {
		t.Errorf("injected mount %+v, example's %+v", got.VolumeMounts, want)
	}
	cfg, err := os.ReadFile("../examples/k8s/tls/kproxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		TLS struct {
			Listener struct {
				CertFile string `json:"cert_file"`
				KeyFile  string `json:"key_file"`
			} `json:"listener"`
		} `json:"tls"`
	}
	if err := yaml.Unmarshal(cfg, &file); err != nil {
		t.Fatal(err)
	}
	l := file.TLS.Listener
	if args := strings.Join(got.Args, " "); !strings.Contains(args, "--tls-cert "+l.CertFile+" --tls-key "+l.KeyFile) {
		t.Errorf("injected args %q; the example's config names %s and %s", args, l.CertFile, l.KeyFile)
	}
}

// kproxy itself takes the injected sidecar's command line: built from
// this repository, `kproxy validate` with the sidecar's args (files moved
// under a temporary directory laid out as a Secret volume) loads the
// certificate and key, and refuses a key that does not match it.
func TestInjectedArgsValidate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kproxy")
	if out, err := exec.Command("go", "build", "-C", "..", "-o", bin, "./cmd/kproxy").CombinedOutput(); err != nil {
		t.Fatalf("go build kproxy (from the repository root): %v\n%s", err, out)
	}
	root := t.TempDir()
	cfg := filepath.Join(root, "etc/kproxy/kproxy.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("proxy:\n  upstream: 127.0.0.1:19092\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pair, other := selfSigned(t), selfSigned(t)
	for _, c := range []struct {
		name string
		key  []byte
		ok   bool
	}{{"matching key", pair[1], true}, {"other key", other[1], false}} {
		secretDir(t, filepath.Join(root, strings.TrimPrefix(TLSDir, "/")), map[string][]byte{"tls.crt": pair[0], "tls.key": c.key})
		args := Sidecar(Defaults(), Asked{Listen: 9092, Upstream: 19092, Secret: "s"}).Args
		args[0] = "validate"
		for i, a := range args {
			if strings.HasPrefix(a, configDir+"/") {
				args[i] = filepath.Join(root, a)
			}
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: kproxy %q: %v\n%s", c.name, args, err, out)
		case !c.ok && (err == nil || !strings.Contains(string(out), "listener.key_file")):
			t.Errorf("%s: kproxy %q: %v, want a failure naming listener.key_file\n%s", c.name, args, err, out)
		}
	}
}

// selfSigned is a fresh self-signed certificate and its key, in PEM.
func selfSigned(t *testing.T) [2][]byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "kafka"},
		DNSNames: []string{"kafka"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return [2][]byte{pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
}

// secretDir lays files out in dir as the kubelet lays out a Secret
// volume (name -> ..data/name, ..data -> a timestamped directory),
// replacing what was there.
func secretDir(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "..2026_01_01_00_00_00.000000001")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(data, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}
