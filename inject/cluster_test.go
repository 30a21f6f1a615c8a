package inject

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// golden checks that kproxy-inject writes out for in (-update rewrites
// out), and that injecting out again changes nothing.
func golden(t *testing.T, in, out string) []byte {
	t.Helper()
	src, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Manifest(src, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(out, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("output differs from %s (go test -update rewrites it):\n%s", out, got)
	}
	again, err := Manifest(want, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Fatalf("a second injection changed %s:\n%s", out, again)
	}
	return want
}

// The client-pod golden manifest, and injecting it twice is once.
func TestClusterGolden(t *testing.T) {
	golden(t, "testdata/cluster-in.yaml", "testdata/cluster-out.yaml")
}

// clusterFile is the part of a generated kproxy.yaml these tests read.
type clusterFile struct {
	Proxy struct {
		Listen   string `json:"listen"`
		Upstream string `json:"upstream"`
	} `json:"proxy"`
	Cluster struct {
		NodePortBase int `json:"node_port_base"`
		NodeIDs      struct {
			Min int `json:"min"`
			Max int `json:"max"`
		} `json:"node_ids"`
	} `json:"cluster"`
	Admin struct {
		Listen string `json:"listen"`
	} `json:"admin"`
	TLS *struct {
		Upstream *struct {
			CAFile string `json:"ca_file"`
		} `json:"upstream"`
	} `json:"tls"`
	SASL *struct {
		Upstream *struct {
			Mechanism    string `json:"mechanism"`
			UsernameFile string `json:"username_file"`
			PasswordFile string `json:"password_file"`
			TokenFile    string `json:"token_file"`
		} `json:"upstream"`
	} `json:"sasl"`
}

// clusterProblems says how a client-pod pod template differs from what
// want asks: the sidecar, the kproxy-config volume showing the template's
// AnnotationClusterConfig as the kproxy.yaml the sidecar reads, and that
// file's proxy and cluster sections.
func clusterProblems(tmpl corev1.PodTemplateSpec, want Asked) []string {
	var out []string
	spec := tmpl.Spec
	if len(spec.InitContainers) == 0 || !reflect.DeepEqual(spec.InitContainers[0], Sidecar(Defaults(), want)) {
		gj, _ := json.Marshal(spec.InitContainers)
		out = append(out, "init containers: "+string(gj))
		return out
	}
	kp := spec.InitContainers[0]
	if !slices.Equal(kp.Args[:3], []string{"run", "--config", "/etc/kproxy/kproxy.yaml"}) || slices.Contains(kp.Args, "--listen") || slices.Contains(kp.Args, "--upstream") {
		out = append(out, "args "+strings.Join(kp.Args, " ")+": want run --config /etc/kproxy/kproxy.yaml, with no --listen or --upstream over it")
	}
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == VolumeName {
			vol = &spec.Volumes[i]
		}
	}
	switch {
	case vol == nil || vol.DownwardAPI == nil || vol.ConfigMap != nil:
		out = append(out, "no downward API volume "+VolumeName)
	case len(vol.DownwardAPI.Items) != 1 || vol.DownwardAPI.Items[0].Path != "kproxy.yaml" || vol.DownwardAPI.Items[0].FieldRef == nil ||
		vol.DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.annotations['kproxy.io/cluster-config']":
		out = append(out, "the volume does not show the annotation kproxy.io/cluster-config as kproxy.yaml")
	}
	raw, ok := tmpl.Annotations[AnnotationClusterConfig]
	if !ok {
		return append(out, "no "+AnnotationClusterConfig+" on the pod template")
	}
	if raw != ClusterConfig(want) {
		out = append(out, "the generated kproxy.yaml is not ClusterConfig's:\n"+raw)
	}
	var f clusterFile
	if err := yaml.Unmarshal([]byte(raw), &f); err != nil {
		return append(out, "generated kproxy.yaml: "+err.Error())
	}
	c := want.Cluster
	if f.Proxy.Listen != "127.0.0.1:"+itoa(want.Listen) || f.Proxy.Upstream != c.Bootstrap || f.Cluster.NodePortBase != c.NodePortBase ||
		f.Cluster.NodeIDs.Min != c.NodeIDMin || f.Cluster.NodeIDs.Max != c.NodeIDMax || f.Admin.Listen != "0.0.0.0:"+itoa(ClusterAdminPort) {
		out = append(out, "generated kproxy.yaml does not carry the annotations:\n"+raw)
	}
	switch {
	case !c.UpstreamTLS && f.TLS != nil:
		out = append(out, "a tls: section, and no TLS to the brokers asked:\n"+raw)
	case c.UpstreamTLS && (f.TLS == nil || f.TLS.Upstream == nil):
		out = append(out, "no tls.upstream, and TLS to the brokers asked:\n"+raw)
	case c.UpstreamCASecret == "" && c.UpstreamTLS && f.TLS.Upstream.CAFile != "":
		out = append(out, "tls.upstream.ca_file set, and the system roots asked:\n"+raw)
	case c.UpstreamCASecret != "" && f.TLS.Upstream.CAFile != UpstreamCADir+"/ca.crt":
		out = append(out, "tls.upstream.ca_file is not the CA Secret's ca.crt:\n"+raw)
	}
	return append(out, saslFileProblems(f, c, raw)...)
}

// saslFileProblems says how the generated kproxy.yaml's sasl: section
// differs from what c asks: none without a SASL Secret, else the
// mechanism and the files of the Secret mounted at SASLDir that it reads
// (username and password, or the token for OAUTHBEARER), nothing else.
func saslFileProblems(f clusterFile, c *Cluster, raw string) []string {
	switch {
	case c.SASLSecret == "" && f.SASL != nil:
		return []string{"a sasl: section, and no SASL Secret asked:\n" + raw}
	case c.SASLSecret == "":
		return nil
	case f.SASL == nil || f.SASL.Upstream == nil:
		return []string{"no sasl.upstream, and a SASL Secret asked:\n" + raw}
	}
	u := *f.SASL.Upstream
	want := u
	want.Mechanism = c.SASLMechanism
	if c.SASLMechanism == "OAUTHBEARER" {
		want.UsernameFile, want.PasswordFile, want.TokenFile = "", "", SASLDir+"/token"
	} else {
		want.UsernameFile, want.PasswordFile, want.TokenFile = SASLDir+"/username", SASLDir+"/password", ""
	}
	if u != want {
		return []string{"sasl.upstream is not the mechanism and the Secret's files asked:\n" + raw}
	}
	return nil
}

// saslProblems says how the pod spec's wiring of the SASL credentials
// differs from what secret asks ("" for none): its Secret volume, all of
// its keys, mounted whole (no subPath, so a rotation reaches kproxy) and
// read-only at SASLDir in the sidecar, and in no other container.
func saslProblems(spec corev1.PodSpec, secret string) []string {
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == SASLVolumeName {
			vol = &spec.Volumes[i]
		}
	}
	var mount *corev1.VolumeMount
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].Name != SASLVolumeName {
				continue
			}
			if c.Name != ContainerName {
				return []string{"container " + c.Name + " mounts the SASL credentials; only kproxy should"}
			}
			mount = &c.VolumeMounts[i]
		}
	}
	switch {
	case secret == "" && (vol != nil || mount != nil):
		return []string{"no SASL Secret asked, yet a volume or mount " + SASLVolumeName}
	case secret == "":
		return nil
	case vol == nil || vol.Secret == nil || vol.Secret.SecretName != secret || len(vol.Secret.Items) > 0:
		return []string{"volume " + SASLVolumeName + ": want all of the Secret " + secret}
	case mount == nil || mount.MountPath != SASLDir || !mount.ReadOnly || mount.SubPath != "":
		return []string{"the sidecar does not mount the SASL Secret whole and read-only at " + SASLDir}
	}
	return nil
}

// upstreamCAProblems says how the pod spec's wiring of the brokers' CA
// differs from what secret asks ("" for none): its Secret volume, mounted
// whole and read-only at UpstreamCADir in the sidecar.
func upstreamCAProblems(spec corev1.PodSpec, secret string) []string {
	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == UpstreamCAVolumeName {
			vol = &spec.Volumes[i]
		}
	}
	var mount *corev1.VolumeMount
	for _, c := range spec.InitContainers {
		for i := range c.VolumeMounts {
			if c.Name == ContainerName && c.VolumeMounts[i].Name == UpstreamCAVolumeName {
				mount = &c.VolumeMounts[i]
			}
		}
	}
	switch {
	case secret == "" && (vol != nil || mount != nil):
		return []string{"no CA Secret asked, yet a volume or mount " + UpstreamCAVolumeName}
	case secret == "":
		return nil
	case vol == nil || vol.Secret == nil || vol.Secret.SecretName != secret || len(vol.Secret.Items) > 0:
		return []string{"volume " + UpstreamCAVolumeName + ": want all of the Secret " + secret}
	case mount == nil || mount.MountPath != UpstreamCADir || !mount.ReadOnly || mount.SubPath != "":
		return []string{"the sidecar does not mount the CA Secret whole and read-only at " + UpstreamCADir}
	}
	return nil
}

// Credentials the validate test lays out: a password to look for in
// kproxy's output, and an unsigned JWT (header {"alg":"none"}, subject
// app) for OAUTHBEARER.
const (
	saslPassword = "s3cret-never-printed"
	unsignedJWT  = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhcHAifQ."
)

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The client-pod output decodes strictly, and each workload's sidecar,
// volume and generated kproxy.yaml are what its annotations ask, with
// the defaults where they are left out; the broker-pod StatefulSet next
// to them is injected as before.
func TestClusterOutput(t *testing.T) {
	out, err := os.ReadFile("testdata/cluster-out.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, out)
	orders := objs["Deployment/orders"].(*appsv1.Deployment).Spec.Template
	want := Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com:9094", NodePortBase: 9100, NodeIDMin: 0, NodeIDMax: 99, UpstreamTLS: true}}
	if p := clusterProblems(orders, want); len(p) > 0 {
		t.Errorf("orders: %v", p)
	}
	if p := tlsProblems(orders.Spec, ""); len(p) > 0 {
		t.Errorf("orders: %v", p)
	}
	if kp := orders.Spec.InitContainers[0]; len(kp.Ports) != 1 || kp.Ports[0].Name != "kproxy-admin" || kp.Ports[0].ContainerPort != ClusterAdminPort {
		t.Errorf("orders: ports %+v, want only kproxy-admin %d (the Kafka listeners are on loopback)", kp.Ports, ClusterAdminPort)
	}

	payments := objs["Deployment/payments"].(*appsv1.Deployment).Spec.Template
	want = Asked{Listen: 9093, Secret: "payments-kproxy-tls", Cluster: &Cluster{Bootstrap: "kafka-bootstrap.streaming.svc:9093", NodePortBase: 9300, NodeIDMin: 1, NodeIDMax: 3,
		UpstreamTLS: true, UpstreamCASecret: "streaming-cluster-ca-cert", SASLSecret: "payments-kafka-user", SASLMechanism: "SCRAM-SHA-512"}}
	if p := clusterProblems(payments, want); len(p) > 0 {
		t.Errorf("payments: %v", p)
	}
	if p := tlsProblems(payments.Spec, "payments-kproxy-tls"); len(p) > 0 {
		t.Errorf("payments: %v", p)
	}
	var names []string
	for _, v := range payments.Spec.Volumes {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"scratch", VolumeName, TLSVolumeName, UpstreamCAVolumeName, SASLVolumeName}) {
		t.Errorf("payments volumes %v: want the user's first, then kproxy's", names)
	}
	if p := upstreamCAProblems(payments.Spec, "streaming-cluster-ca-cert"); len(p) > 0 {
		t.Errorf("payments: %v", p)
	}
	if p := upstreamCAProblems(orders.Spec, ""); len(p) > 0 {
		t.Errorf("orders: %v", p)
	}
	if p := saslProblems(payments.Spec, "payments-kafka-user"); len(p) > 0 {
		t.Errorf("payments: %v", p)
	}
	if p := saslProblems(orders.Spec, ""); len(p) > 0 {
		t.Errorf("orders: %v", p)
	}

	audit := objs["Deployment/audit"].(*appsv1.Deployment).Spec.Template
	want = Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "kafka.example.com:9096", NodePortBase: 9100, NodeIDMax: 99, UpstreamTLS: true,
		SASLSecret: "audit-kafka-token", SASLMechanism: "OAUTHBEARER"}}
	if p := slices.Concat(clusterProblems(audit, want), saslProblems(audit.Spec, "audit-kafka-token"), tlsProblems(audit.Spec, ""), upstreamCAProblems(audit.Spec, "")); len(p) > 0 {
		t.Errorf("audit: %v", p)
	}

	kafka := objs["StatefulSet/kafka"].(*appsv1.StatefulSet).Spec.Template
	if len(kafka.Spec.InitContainers) != 1 || !reflect.DeepEqual(kafka.Spec.InitContainers[0], Sidecar(Defaults(), Asked{Listen: 9092, Upstream: 19092})) {
		t.Errorf("kafka (mode: broker): init containers %+v", kafka.Spec.InitContainers)
	}
	if _, ok := kafka.Annotations[AnnotationClusterConfig]; ok || kafka.Spec.Volumes[0].ConfigMap == nil {
		t.Errorf("kafka (mode: broker): a generated config or no ConfigMap: %+v", kafka)
	}
	if p := saslProblems(kafka.Spec, ""); len(p) > 0 {
		t.Errorf("kafka (mode: broker): %v", p)
	}
}

// The webhook's patch gives what kproxy-inject writes for every document
// of the client-pod golden manifest.
func TestClusterWebhook(t *testing.T) {
	in, err := os.ReadFile("testdata/cluster-in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs(in) {
		throughBoth(t, doc)
	}
	// A pod template without metadata at all gets the annotation too.
	bare := []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n  annotations:\n    kproxy.io/inject: \"true\"\n    kproxy.io/mode: cluster\n    kproxy.io/bootstrap: kafka:9092\nspec:\n  template:\n    spec:\n      containers: []\n")
	spec := throughBoth(t, bare)
	out, err := Manifest(bare, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict(out, &dep); err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Template.Annotations[AnnotationClusterConfig] == "" || len(spec.InitContainers) != 1 {
		t.Errorf("a template without metadata: %s", out)
	}
}

// annotated is a Deployment whose workload metadata carries ann.
func annotated(ann map[string]string) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n  annotations:\n    kproxy.io/inject: \"true\"\n")
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, _ := json.Marshal(ann[k])
		b.WriteString("    " + k + ": " + string(v) + "\n")
	}
	b.WriteString("spec:\n  selector: {}\n  template:\n    metadata:\n      labels: {app: x}\n    spec:\n      containers: []\n")
	return []byte(b.String())
}

// Bad client-pod annotations are an error naming the annotation at fault
// from kproxy-inject, and a warning without a patch from the webhook.
func TestClusterBadAnnotations(t *testing.T) {
	cluster := func(kv ...string) map[string]string {
		m := map[string]string{AnnotationMode: ModeCluster, AnnotationBootstrap: "kafka:9092"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "<unset>" {
				delete(m, kv[i])
				continue
			}
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name string
		ann  map[string]string
		want string // in the error
	}{
		{"no bootstrap", cluster(AnnotationBootstrap, "<unset>"), "annotation kproxy.io/bootstrap (HOST:PORT of any broker of the cluster) is required"},
		{"empty bootstrap", cluster(AnnotationBootstrap, ""), AnnotationBootstrap},
		{"bootstrap without a port", cluster(AnnotationBootstrap, "kafka"), AnnotationBootstrap},
		{"bootstrap port 0", cluster(AnnotationBootstrap, "kafka:0"), AnnotationBootstrap},
		{"bootstrap port a word", cluster(AnnotationBootstrap, "kafka:kafka"), AnnotationBootstrap},
		{"bootstrap without a host", cluster(AnnotationBootstrap, ":9092"), AnnotationBootstrap},
		{"two bootstraps", cluster(AnnotationBootstrap, "a:9092,b:9092"), AnnotationBootstrap},
		{"bootstrap with a scheme", cluster(AnnotationBootstrap, "kafka://a:9092"), AnnotationBootstrap},
		{"bootstrap not a DNS name", cluster(AnnotationBootstrap, "kafka_1:9092"), AnnotationBootstrap},
		{"unknown mode", cluster(AnnotationMode, "client"), `annotation kproxy.io/mode="client": want "broker" or "cluster"`},
		{"mode in capitals", cluster(AnnotationMode, "Cluster"), AnnotationMode},
		{"empty mode", cluster(AnnotationMode, ""), AnnotationMode},
		{"node port base a word", cluster(AnnotationNodePortBase, "high"), AnnotationNodePortBase},
		{"node port base 0", cluster(AnnotationNodePortBase, "0"), AnnotationNodePortBase},
		{"node port base too high", cluster(AnnotationNodePortBase, "65536"), AnnotationNodePortBase},
		{"node ports past 65535", cluster(AnnotationNodePortBase, "65500"), "go past 65535"},
		{"node ids one number", cluster(AnnotationNodeIDs, "5"), AnnotationNodeIDs},
		{"node ids reversed", cluster(AnnotationNodeIDs, "9-3"), AnnotationNodeIDs},
		{"node ids negative", cluster(AnnotationNodeIDs, "-1-4"), AnnotationNodeIDs},
		{"node ids words", cluster(AnnotationNodeIDs, "a-b"), AnnotationNodeIDs},
		{"node ids past int32", cluster(AnnotationNodeIDs, "0-2147483648"), AnnotationNodeIDs},
		{"more node ids than kproxy serves", cluster(AnnotationNodeIDs, "0-4096", AnnotationNodePortBase, "10000"), "spans 4097 node ids; kproxy serves at most 4096"},
		{"node ports cover the bootstrap port", cluster(AnnotationNodePortBase, "9050"), "include the bootstrap listener's port kproxy.io/listen-port 9092"},
		{"node ports cover the admin port", cluster(AnnotationNodePortBase, "9250"), "include the admin port 9290"},
		{"listen port is the admin port", cluster(AnnotationListenPort, "9290"), AnnotationListenPort},
		{"bad listen port", cluster(AnnotationListenPort, "nine"), AnnotationListenPort},
		{"upstream port in cluster mode", cluster(AnnotationUpstreamPort, "19092"), "annotation kproxy.io/upstream-port is not used in cluster mode"},
		{"bootstrap without the mode", cluster(AnnotationMode, "<unset>"), "annotation kproxy.io/bootstrap is not used in broker mode"},
		{"node ids in broker mode", map[string]string{AnnotationMode: ModeBroker, AnnotationNodeIDs: "0-9"}, "annotation kproxy.io/node-ids is not used in broker mode"},
		{"node port base without the mode", map[string]string{AnnotationNodePortBase: "9100"}, AnnotationNodePortBase},
		{"bad TLS secret in cluster mode", cluster(AnnotationTLSSecret, "Not_A_Name"), AnnotationTLSSecret},
		{"upstream TLS neither true nor false", cluster(AnnotationUpstreamTLS, "yes"), `annotation kproxy.io/upstream-tls="yes": want "true" or "false"`},
		{"bad CA secret", cluster(AnnotationUpstreamCASecret, "ca/cert"), AnnotationUpstreamCASecret},
		{"empty CA secret", cluster(AnnotationUpstreamCASecret, ""), AnnotationUpstreamCASecret},
		{"CA secret with upstream TLS off", cluster(AnnotationUpstreamCASecret, "ca", AnnotationUpstreamTLS, "false"), "kproxy.io/upstream-ca-secret needs TLS to the brokers"},
		{"upstream TLS in broker mode", map[string]string{AnnotationUpstreamTLS: "true"}, "annotation kproxy.io/upstream-tls is not used in broker mode"},
		{"CA secret in broker mode", map[string]string{AnnotationMode: ModeBroker, AnnotationUpstreamCASecret: "ca"}, "annotation kproxy.io/upstream-ca-secret is not used in broker mode"},
		{"SASL mechanism without a secret", cluster(AnnotationSASLMechanism, "PLAIN"), "annotation kproxy.io/sasl-mechanism needs kproxy.io/sasl-secret"},
		{"SASL secret without a mechanism", cluster(AnnotationSASLSecret, "creds"), "annotation kproxy.io/sasl-secret needs kproxy.io/sasl-mechanism (one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)"},
		{"unknown SASL mechanism", cluster(AnnotationSASLSecret, "creds", AnnotationSASLMechanism, "GSSAPI"), `annotation kproxy.io/sasl-mechanism="GSSAPI": want one of PLAIN`},
		{"SASL mechanism in lower case", cluster(AnnotationSASLSecret, "creds", AnnotationSASLMechanism, "scram-sha-512"), AnnotationSASLMechanism},
		{"empty SASL mechanism", cluster(AnnotationSASLSecret, "creds", AnnotationSASLMechanism, ""), AnnotationSASLMechanism},
		{"bad SASL secret", cluster(AnnotationSASLSecret, "creds/user", AnnotationSASLMechanism, "PLAIN"), AnnotationSASLSecret},
		{"empty SASL secret", cluster(AnnotationSASLSecret, "", AnnotationSASLMechanism, "PLAIN"), AnnotationSASLSecret},
		{"SASL secret in broker mode", map[string]string{AnnotationSASLSecret: "creds", AnnotationSASLMechanism: "PLAIN"}, "is not used in broker mode"},
		{"SASL secret alone in broker mode", map[string]string{AnnotationMode: ModeBroker, AnnotationSASLSecret: "creds"}, "annotation kproxy.io/sasl-secret is not used in broker mode"},
		{"SASL mechanism alone in broker mode", map[string]string{AnnotationSASLMechanism: "SCRAM-SHA-256"}, "annotation kproxy.io/sasl-mechanism is not used in broker mode"},
		{"OAuth secret without a token endpoint", cluster(AnnotationOAuthSecret, "oauth"), "the OAuth annotations need kproxy.io/oauth-token-endpoint"},
		{"OAuth token endpoint alone", cluster(AnnotationOAuthTokenEndpoint, "https://idp/token"), "needs kproxy.io/oauth-secret (a Secret with client-id and client-secret) or kproxy.io/oauth-service-account-audience"},
		{"OAuth token endpoint not a URL", cluster(AnnotationOAuthTokenEndpoint, "idp:443", AnnotationOAuthSecret, "oauth"), "annotation kproxy.io/oauth-token-endpoint=\"idp:443\": want an https URL"},
		{"OAuth secret and ServiceAccount", cluster(AnnotationOAuthTokenEndpoint, "https://idp/token", AnnotationOAuthSecret, "oauth",
			AnnotationOAuthServiceAccountAudience, "https://idp", AnnotationOAuthClientID, "c"), "two ways to authenticate the OAuth client"},
		{"OAuth ServiceAccount without a client id", cluster(AnnotationOAuthTokenEndpoint, "https://idp/token", AnnotationOAuthServiceAccountAudience, "https://idp"),
			"annotation kproxy.io/oauth-service-account-audience needs kproxy.io/oauth-client-id"},
		{"OAuth and a SASL secret", cluster(AnnotationOAuthTokenEndpoint, "https://idp/token", AnnotationOAuthSecret, "oauth",
			AnnotationSASLSecret, "creds", AnnotationSASLMechanism, "PLAIN"), "two sources of broker credentials"},
		{"OAuth secret not a name", cluster(AnnotationOAuthTokenEndpoint, "https://idp/token", AnnotationOAuthSecret, "Oauth_1"), "annotation kproxy.io/oauth-secret=\"Oauth_1\""},
		{"OAuth scope with a quote", cluster(AnnotationOAuthTokenEndpoint, "https://idp/token", AnnotationOAuthSecret, "oauth", AnnotationOAuthScope, `a"b`), "may not hold quotes"},
		{"OAuth in broker mode", map[string]string{AnnotationOAuthSecret: "oauth"}, "annotation kproxy.io/oauth-secret is not used in broker mode"},
	} {
		in := annotated(c.ann)
		if _, err := Manifest(in, Defaults()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one with %q", c.name, err, c.want)
		}
		raw, err := yaml.YAMLToJSON(in)
		if err != nil {
			t.Fatal(err)
		}
		if resp := review(t, Webhook(Defaults()), raw); resp.Patch != nil || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], c.want) {
			t.Errorf("%s: webhook %+v, want no patch and a warning with %q", c.name, resp, c.want)
		}
	}
	// The accepted edges: the highest ports, an IP address, IPv6, a
	// bootstrap name in capitals, a single node id.
	for _, ann := range []map[string]string{
		cluster(AnnotationNodePortBase, "65436"),
		cluster(AnnotationBootstrap, "10.0.0.7:9092"),
		cluster(AnnotationBootstrap, "[fd00::7]:9092"),
		cluster(AnnotationBootstrap, "Kafka.Example.COM:9092"),
		cluster(AnnotationNodeIDs, "7-7"),
		cluster(AnnotationNodeIDs, "1000-5095", AnnotationNodePortBase, "10000"), // 4096 ids
		cluster(AnnotationNodeIDs, "2147483547-2147483646"),
		cluster(AnnotationNodePortBase, "9093"), // just past the bootstrap port
		cluster(AnnotationSASLSecret, "creds", AnnotationSASLMechanism, "PLAIN"),
		cluster(AnnotationSASLSecret, "creds", AnnotationSASLMechanism, "SCRAM-SHA-256"),
		cluster(AnnotationSASLSecret, "creds", AnnotationSASLMechanism, "SCRAM-SHA-512"),
		cluster(AnnotationSASLSecret, "creds", AnnotationSASLMechanism, "OAUTHBEARER"),
		cluster(AnnotationOAuthTokenEndpoint, "https://idp/token", AnnotationOAuthSecret, "oauth"),
		cluster(AnnotationOAuthTokenEndpoint, "https://idp/token", AnnotationOAuthServiceAccountAudience, "https://idp", AnnotationOAuthClientID, "kafka-orders",
			AnnotationOAuthScope, "kafka produce", AnnotationOAuthAudience, "kafka"),
	} {
		if _, err := Manifest(annotated(ann), Defaults()); err != nil {
			t.Errorf("%v: %v", ann, err)
		}
	}
}

// Switching a workload injected in broker mode to cluster mode replaces
// the ConfigMap volume with the generated config and drops the port
// flags; switching it back gives exactly the broker-mode injection again,
// the generated annotation removed; kproxy-inject and the webhook agree
// at every step.
func TestModeSwitch(t *testing.T) {
	out, err := os.ReadFile("testdata/out.yaml")
	if err != nil {
		t.Fatal(err)
	}
	app := docs(out)[1]
	if !bytes.Contains(app, []byte("name: app\n")) {
		t.Fatalf("want the app Deployment second in testdata/out.yaml:\n%s", app)
	}
	on := bytes.Replace(app, []byte(`    kproxy.io/inject: "true"`),
		[]byte("    kproxy.io/inject: \"true\"\n    kproxy.io/mode: cluster\n    kproxy.io/bootstrap: kafka.example.com:9094\n    kproxy.io/tls-secret: app-tls"), 1)
	if bytes.Equal(on, app) {
		t.Fatal("could not annotate the app Deployment")
	}
	throughBoth(t, on)
	cli, err := Manifest(on, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict(cli, &dep); err != nil {
		t.Fatal(err)
	}
	want := Asked{Listen: 9092, Secret: "app-tls", Cluster: &Cluster{Bootstrap: "kafka.example.com:9094", NodePortBase: 9100, NodeIDMax: 99}}
	if p := clusterProblems(dep.Spec.Template, want); len(p) > 0 {
		t.Errorf("switched to cluster mode: %v", p)
	}
	if p := tlsProblems(dep.Spec.Template.Spec, "app-tls"); len(p) > 0 {
		t.Errorf("switched to cluster mode: %v", p)
	}
	if names := initNames(dep.Spec.Template.Spec); !slices.Equal(names, []string{ContainerName, "migrate"}) {
		t.Errorf("init containers %v: want kproxy replaced in place", names)
	}

	back := cli
	for _, line := range []string{"    kproxy.io/mode: cluster\n", "    kproxy.io/bootstrap: kafka.example.com:9094\n", "    kproxy.io/tls-secret: app-tls\n"} {
		if !bytes.Contains(back, []byte(line)) {
			t.Fatalf("no %q in\n%s", line, back)
		}
		back = bytes.Replace(back, []byte(line), nil, 1)
	}
	throughBoth(t, back)
	again, err := Manifest(back, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(again), bytes.TrimSpace(app)) {
		t.Errorf("back in broker mode, the Deployment is not the broker-mode injection:\n%s\nwant:\n%s", again, app)
	}

	// Annotated on the pod template, next to other annotations: only the
	// generated one goes.
	cout, err := os.ReadFile("testdata/cluster-out.yaml")
	if err != nil {
		t.Fatal(err)
	}
	orders := docs(cout)[0]
	broker := orders
	for _, prefix := range []string{"        kproxy.io/bootstrap: ", "        kproxy.io/mode: ", "        kproxy.io/upstream-tls: "} {
		i := bytes.Index(broker, []byte(prefix))
		if i < 0 {
			t.Fatalf("want the orders Deployment, annotated %s on its template, first in testdata/cluster-out.yaml:\n%s", prefix, orders)
		}
		j := i + bytes.IndexByte(broker[i:], '\n') + 1
		broker = append(slices.Clone(broker[:i]), broker[j:]...)
	}
	spec := throughBoth(t, broker)
	again, err = Manifest(broker, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	var dep2 appsv1.Deployment
	if err := yaml.UnmarshalStrict(again, &dep2); err != nil {
		t.Fatal(err)
	}
	if ann := dep2.Spec.Template.Annotations; len(ann) != 1 || ann[AnnotationInject] != "true" {
		t.Errorf("back in broker mode, the template's annotations are %v, want only %s", ann, AnnotationInject)
	}
	if !reflect.DeepEqual(spec.InitContainers[0], Sidecar(Defaults(), Asked{Listen: 9092, Upstream: 19092})) || spec.Volumes[0].ConfigMap == nil {
		t.Errorf("back in broker mode: %+v", spec)
	}
}

// Dropping the TLS, CA and SASL annotations of a client pod removes
// their volumes (all in one patch), mounts and flags, and the tls: and
// sasl: sections of the generated kproxy.yaml; dropping only the CA
// Secret (which alone asked for TLS to the brokers) keeps TLS from the
// application and SASL; dropping only the SASL annotations keeps both
// TLS Secrets. kproxy-inject and the webhook agree.
func TestClusterSecretsOff(t *testing.T) {
	out, err := os.ReadFile("testdata/cluster-out.yaml")
	if err != nil {
		t.Fatal(err)
	}
	payments := docs(out)[1]
	tlsLine, caLine := []byte("    kproxy.io/tls-secret: payments-kproxy-tls\n"), []byte("    kproxy.io/upstream-ca-secret: streaming-cluster-ca-cert\n")
	saslLines := [][]byte{[]byte("    kproxy.io/sasl-secret: payments-kafka-user\n"), []byte("    kproxy.io/sasl-mechanism: SCRAM-SHA-512\n")}
	for _, line := range append([][]byte{tlsLine, caLine}, saslLines...) {
		if !bytes.Contains(payments, line) {
			t.Fatalf("want the payments Deployment, with %q, second in testdata/cluster-out.yaml:\n%s", line, payments)
		}
	}
	without := func(lines ...[]byte) []byte {
		doc := payments
		for _, l := range lines {
			doc = bytes.Replace(doc, l, nil, 1)
		}
		return doc
	}
	check := func(name string, doc []byte, asked Asked) []corev1.Volume {
		t.Helper()
		spec := throughBoth(t, doc)
		tmpl := corev1.PodTemplateSpec{Spec: spec}
		tmpl.Annotations = templateAnnotations(t, doc)
		c := asked.Cluster
		if p := slices.Concat(clusterProblems(tmpl, asked), tlsProblems(spec, asked.Secret), upstreamCAProblems(spec, c.UpstreamCASecret), saslProblems(spec, c.SASLSecret)); len(p) > 0 {
			t.Errorf("%s: %v", name, p)
		}
		return spec.Volumes
	}
	plain := Cluster{Bootstrap: "kafka-bootstrap.streaming.svc:9093", NodePortBase: 9300, NodeIDMin: 1, NodeIDMax: 3}

	vols := check("every Secret off", without(tlsLine, caLine, saslLines[0], saslLines[1]), Asked{Listen: 9093, Cluster: &plain})
	var names []string
	for _, v := range vols {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"scratch", VolumeName}) {
		t.Errorf("every Secret off: volumes %v", names)
	}

	// Plaintext to the brokers: the CA Secret alone asked for TLS.
	scram := plain
	scram.SASLSecret, scram.SASLMechanism = "payments-kafka-user", "SCRAM-SHA-512"
	check("CA Secret off", without(caLine), Asked{Listen: 9093, Secret: "payments-kproxy-tls", Cluster: &scram})

	tlsBoth := plain
	tlsBoth.UpstreamTLS, tlsBoth.UpstreamCASecret = true, "streaming-cluster-ca-cert"
	check("SASL off", without(saslLines...), Asked{Listen: 9093, Secret: "payments-kproxy-tls", Cluster: &tlsBoth})
}

// templateAnnotations is the pod template's annotations once doc is
// injected.
func templateAnnotations(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	out, err := Manifest(doc, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict(out, &dep); err != nil {
		t.Fatal(err)
	}
	return dep.Spec.Template.Annotations
}

func initNames(spec corev1.PodSpec) []string {
	var n []string
	for _, c := range spec.InitContainers {
		n = append(n, c.Name)
	}
	return n
}

// The injected client-pod sidecar is the one in examples/k8s/client-pod,
// and its generated kproxy.yaml says what that example's does (for the
// example's bootstrap and SASL Secret), so the two cannot drift apart.
func TestClusterMatchesExample(t *testing.T) {
	raw, err := os.ReadFile("../examples/k8s/client-pod/kproxy-sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var patch appsv1.Deployment
	if err := yaml.UnmarshalStrict(raw, &patch); err != nil {
		t.Fatal(err)
	}
	example := patch.Spec.Template.Spec.InitContainers[0]
	cfgRaw, err := os.ReadFile("../examples/k8s/client-pod/kproxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var exampleCfg map[string]any
	if err := yaml.Unmarshal(cfgRaw, &exampleCfg); err != nil {
		t.Fatal(err)
	}
	upstream, _ := exampleCfg["proxy"].(map[string]any)["upstream"].(string)
	a := Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: upstream, NodePortBase: 9100, NodeIDMax: 99}}
	// The example authenticates with a Secret of its own: the injector's
	// kproxy.io/sasl-secret and kproxy.io/sasl-mechanism.
	sasl, _ := exampleCfg["sasl"].(map[string]any)
	a.Cluster.SASLMechanism, _ = sasl["upstream"].(map[string]any)["mechanism"].(string)
	for _, v := range patch.Spec.Template.Spec.Volumes {
		if v.Name == SASLVolumeName && v.Secret != nil {
			a.Cluster.SASLSecret = v.Secret.SecretName
		}
	}
	if a.Cluster.SASLSecret == "" || a.Cluster.SASLMechanism == "" {
		t.Fatalf("the example has no %s Secret volume or no sasl.upstream.mechanism", SASLVolumeName)
	}
	if !slices.ContainsFunc(patch.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return reflect.DeepEqual(v, saslVolume(a.Cluster)) }) {
		t.Errorf("the example's volumes %+v lack the injector's %+v", patch.Spec.Template.Spec.Volumes, saslVolume(a.Cluster))
	}
	got := Sidecar(Defaults(), a)
	if !reflect.DeepEqual(got, example) {
		gj, _ := json.MarshalIndent(got, "", " ")
		wj, _ := json.MarshalIndent(example, "", " ")
		t.Errorf("injector sidecar:\n%s\nexample sidecar:\n%s", gj, wj)
	}
	var gotCfg map[string]any
	if err := yaml.Unmarshal([]byte(ClusterConfig(a)), &gotCfg); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotCfg, exampleCfg) {
		t.Errorf("generated kproxy.yaml %v\nexample's %v", gotCfg, exampleCfg)
	}
}

// kproxy itself, built from this repository, agrees with the injector
// on the generated client-pod kproxy.yaml: with the sidecar's command line
// (TLS flags included, the Secrets laid out as the kubelet does), kproxy
// validate accepts every file whose ports the injector accepts, with
// every SASL mechanism (without printing the password), and refuses every
// one the injector refuses.
func TestClusterConfigValidates(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kproxy")
	if out, err := exec.Command("go", "build", "-C", "..", "-o", bin, "./cmd/kproxy").CombinedOutput(); err != nil {
		t.Fatalf("go build kproxy (from the repository root): %v\n%s", err, out)
	}
	root := t.TempDir()
	pair := selfSigned(t)
	secretDir(t, filepath.Join(root, strings.TrimPrefix(TLSDir, "/")), map[string][]byte{"tls.crt": pair[0], "tls.key": pair[1]})
	cfg := filepath.Join(root, "etc/kproxy/kproxy.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	roots := Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "b-1.example.com:9094", NodePortBase: 9100, NodeIDMax: 99, UpstreamTLS: true}}
	withCA := Asked{Listen: 9092, Secret: "s", Cluster: &Cluster{Bootstrap: "kafka-bootstrap:9093", NodePortBase: 9100, NodeIDMax: 99, UpstreamTLS: true, UpstreamCASecret: "ca"}}
	ca := selfSigned(t)[0]
	sasl := func(mech string) Asked {
		return Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "b-1.example.com:9096", NodePortBase: 9100, NodeIDMax: 99, UpstreamTLS: true,
			SASLSecret: "creds", SASLMechanism: mech}}
	}
	oauth := func(o *OAuth) Asked {
		return Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "b-1.example.com:9096", NodePortBase: 9100, NodeIDMax: 99, UpstreamTLS: true, OAuth: o}}
	}
	for _, c := range []struct {
		name string
		a    Asked
		ca   []byte // the CA Secret's ca.crt, for a.Cluster.UpstreamCASecret
		// creds are the SASL Secret's keys, for a.Cluster.SASLSecret;
		// nil: username, password and token.
		creds map[string][]byte
		ok    bool // kproxy and the injector take it
	}{
		{"defaults", Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "kafka-bootstrap:9092", NodePortBase: 9100, NodeIDMax: 99}}, nil, nil, true},
		{"TLS, IPv6 bootstrap, a few ids", Asked{Listen: 9093, Secret: "s", Cluster: &Cluster{Bootstrap: "[fd00::7]:9094", NodePortBase: 9300, NodeIDMin: 1, NodeIDMax: 3}}, nil, nil, true},
		{"ports up to 65535", Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "k:9092", NodePortBase: 65436, NodeIDMax: 99}}, nil, nil, true},
		{"4096 ids", Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "k:9092", NodePortBase: 10000, NodeIDMin: 1000, NodeIDMax: 5095}}, nil, nil, true},
		{"the highest ids", Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "k:9092", NodePortBase: 9100, NodeIDMin: 2147483547, NodeIDMax: 2147483646}}, nil, nil, true},
		{"TLS to the brokers, system roots", roots, nil, nil, true},
		{"TLS both ways, CA from a Secret", withCA, ca, nil, true},
		{"SASL PLAIN", sasl("PLAIN"), nil, nil, true},
		{"SASL SCRAM-SHA-256", sasl("SCRAM-SHA-256"), nil, nil, true},
		{"SASL SCRAM-SHA-512", sasl("SCRAM-SHA-512"), nil, nil, true},
		{"SASL OAUTHBEARER", sasl("OAUTHBEARER"), nil, nil, true},
		{"SASL OAUTHBEARER, a Secret without token", sasl("OAUTHBEARER"), nil, map[string][]byte{"username": []byte("app"), "password": []byte(saslPassword)}, false},
		{"SASL SCRAM, a Secret with an empty password", sasl("SCRAM-SHA-512"), nil, map[string][]byte{"username": []byte("app"), "password": nil}, false},
		{"OAuth with a Secret", oauth(&OAuth{TokenEndpoint: "https://idp.example/oauth2/token", Secret: "oauth"}), nil, nil, true},
		{"OAuth with a Secret and a client id", oauth(&OAuth{TokenEndpoint: "https://idp.example/oauth2/token", Secret: "oauth", ClientID: "kafka-orders", Scope: "kafka", Audience: "kafka"}), nil, nil, true},
		{"OAuth with the ServiceAccount token", oauth(&OAuth{TokenEndpoint: "https://idp.example/oauth2/token", SAAudience: "https://idp.example", ClientID: "kafka-orders"}), nil, nil, true},
		{"OAuth, a Secret without client-secret", oauth(&OAuth{TokenEndpoint: "https://idp.example/oauth2/token", Secret: "oauth"}), nil, map[string][]byte{"client-id": []byte("kafka-orders")}, false},
		{"a CA Secret whose ca.crt is no certificate", withCA, []byte("not a certificate\n"), nil, false},
		{"node ports over admin", Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "k:9092", NodePortBase: 9250, NodeIDMax: 99}}, nil, nil, false},
		{"node ports over listen", Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "k:9092", NodePortBase: 9050, NodeIDMax: 99}}, nil, nil, false},
		{"node ports past 65535", Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "k:9092", NodePortBase: 65437, NodeIDMax: 99}}, nil, nil, false},
		{"4097 ids", Asked{Listen: 9092, Cluster: &Cluster{Bootstrap: "k:9092", NodePortBase: 10000, NodeIDMax: 4096}}, nil, nil, false},
	} {
		if err := os.WriteFile(cfg, []byte(ClusterConfig(c.a)), 0o600); err != nil {
			t.Fatal(err)
		}
		if c.a.Cluster.UpstreamCASecret != "" {
			secretDir(t, filepath.Join(root, strings.TrimPrefix(UpstreamCADir, "/")), map[string][]byte{"ca.crt": c.ca})
		}
		if c.a.Cluster.SASLSecret != "" {
			creds := c.creds
			if creds == nil {
				creds = map[string][]byte{"username": []byte("app"), "password": []byte(saslPassword), "token": []byte(unsignedJWT)}
			}
			secretDir(t, filepath.Join(root, strings.TrimPrefix(SASLDir, "/")), creds)
		}
		if c.a.Cluster.OAuth != nil {
			creds := c.creds
			if creds == nil {
				creds = map[string][]byte{"client-id": []byte("kafka-orders"), "client-secret": []byte(saslPassword), "token": []byte(unsignedJWT)}
			}
			secretDir(t, filepath.Join(root, strings.TrimPrefix(OAuthDir, "/")), creds)
		}
		args := Sidecar(Defaults(), c.a).Args
		args[0] = "validate"
		for i, arg := range args {
			if strings.HasPrefix(arg, configDir+"/") {
				args[i] = filepath.Join(root, arg)
			}
		}
		// The generated file names the CA and the credentials where the
		// pod mounts them; here that is under root.
		if c.a.Cluster.UpstreamCASecret != "" || c.a.Cluster.SASLSecret != "" || c.a.Cluster.OAuth != nil {
			moved := strings.NewReplacer(UpstreamCADir+"/", filepath.Join(root, UpstreamCADir)+"/", SASLDir+"/", filepath.Join(root, SASLDir)+"/",
				OAuthDir+"/", filepath.Join(root, OAuthDir)+"/").Replace(ClusterConfig(c.a))
			if err := os.WriteFile(cfg, []byte(moved), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if (err == nil) != c.ok {
			t.Errorf("%s: kproxy %q: %v, want ok=%v\n%s\n%s", c.name, args, err, c.ok, out, ClusterConfig(c.a))
		}
		if strings.Contains(string(out), saslPassword) {
			t.Errorf("%s: kproxy validate printed the password:\n%s", c.name, out)
		}
		if c.ca != nil || c.creds != nil {
			continue // the injector cannot see the Secret's content
		}
		if ierr := c.a.Cluster.check(c.a.Listen); (ierr == nil) != c.ok {
			t.Errorf("%s: injector: %v, want ok=%v", c.name, ierr, c.ok)
		}
	}
	// kproxy validate does not compare proxy.listen's port with
	// admin.listen's (127.0.0.1:9290 and 0.0.0.0:9290 differ as text, but
	// the second bind fails at start); the injector refuses it.
	if err := (&Cluster{Bootstrap: "k:9092", NodePortBase: 9100, NodeIDMax: 99}).check(ClusterAdminPort); err == nil {
		t.Error("injector: the bootstrap listener on the admin port was taken")
	}
}
