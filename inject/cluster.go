package inject

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations of the client-pod shape: kproxy in the application's pod,
// in front of a whole cluster (kproxy.yaml's cluster: section).
const (
	// AnnotationMode is "broker" (the default: kproxy in a broker's pod,
	// in front of that broker) or "cluster" (kproxy in a client's pod, in
	// front of every broker of a cluster).
	AnnotationMode = "kproxy.io/mode"
	// AnnotationBootstrap is the cluster's bootstrap address, HOST:PORT
	// (proxy.upstream). Required in cluster mode.
	AnnotationBootstrap = "kproxy.io/bootstrap"
	// AnnotationNodePortBase is cluster.node_port_base, default 9100.
	AnnotationNodePortBase = "kproxy.io/node-port-base"
	// AnnotationNodeIDs is cluster.node_ids as "MIN-MAX", default "0-99".
	AnnotationNodeIDs = "kproxy.io/node-ids"
	// AnnotationUpstreamTLS "true" has kproxy speak TLS to the brokers
	// (tls.upstream), verifying them against the system roots: what
	// managed clusters need, while the application talks plaintext to
	// localhost.
	AnnotationUpstreamTLS = "kproxy.io/upstream-tls"
	// AnnotationUpstreamCASecret names a Secret in the workload's
	// namespace whose ca.crt the brokers' certificates must chain to
	// (tls.upstream.ca_file), e.g. a Strimzi cluster's
	// <cluster>-cluster-ca-cert. It implies upstream TLS.
	AnnotationUpstreamCASecret = "kproxy.io/upstream-ca-secret"
	// AnnotationClusterConfig is written by the injector, not by users:
	// the pod template's copy of the generated kproxy.yaml, which the
	// sidecar reads through a downward API volume. A webhook may only
	// patch the workload it is sent, not create a ConfigMap, so the file
	// travels with the pod; an annotation change also rolls the pods.
	AnnotationClusterConfig = "kproxy.io/cluster-config"
)

// The values of AnnotationMode.
const (
	ModeBroker  = "broker"
	ModeCluster = "cluster"
)

// Cluster is what a client-pod workload asks of its sidecar.
type Cluster struct {
	Bootstrap    string // proxy.upstream, HOST:PORT
	NodePortBase int    // cluster.node_port_base
	NodeIDMin    int    // cluster.node_ids.min
	NodeIDMax    int    // cluster.node_ids.max
	UpstreamTLS  bool   // tls.upstream: TLS to the brokers
	// UpstreamCASecret is the Secret holding the brokers' CA (ca.crt);
	// empty: the system roots.
	UpstreamCASecret string
	// SASLSecret is the Secret holding the credentials kproxy
	// authenticates to the brokers with, SASLMechanism the mechanism
	// (sasl.upstream); empty: no SASL origination.
	SASLSecret    string
	SASLMechanism string
	// ClientRack, when ClientRackSet, is the rack id kproxy fills into
	// Fetch requests (kproxy.io/client-rack); unset, the pod's zone
	// label is used.
	ClientRack    string
	ClientRackSet bool
	// OAuth, when set, makes kproxy fetch OAUTHBEARER tokens itself
	// (the kproxy.io/oauth-* annotations).
	OAuth *OAuth
}

// The upstream CA Secret's volume, and where the sidecar mounts it:
// whole, so a renewed CA reaches kproxy, which reloads it.
const (
	UpstreamCAVolumeName = "kproxy-upstream-ca"
	UpstreamCADir        = configDir + "/upstream-ca"
)

// ClusterAdminPort is the admin port (probes, /metrics) of a client-pod
// sidecar. It is not the broker pod's 9190, which the default node ports
// 9100-9199 cover.
const ClusterAdminPort = 9290

// maxNodePorts is kproxy's bound on node_ids' span (cluster.Config).
const maxNodePorts = 4096

// Defaults of the cluster annotations, those of kproxy's cluster: section.
const (
	defaultNodePortBase = 9100
	defaultNodeIDMin    = 0
	defaultNodeIDMax    = 99
)

// brokerOnly are the annotations that mean nothing in cluster mode, and
// clusterOnly those that mean nothing in broker mode: either in the wrong
// mode is an error rather than silently ignored (a forgotten
// kproxy.io/mode: cluster would otherwise inject a broker-pod sidecar).
var (
	brokerOnly  = []string{AnnotationUpstreamPort}
	clusterOnly = []string{AnnotationBootstrap, AnnotationNodePortBase, AnnotationNodeIDs, AnnotationUpstreamTLS, AnnotationUpstreamCASecret,
		AnnotationSASLSecret, AnnotationSASLMechanism, AnnotationClientRack,
		AnnotationOAuthTokenEndpoint, AnnotationOAuthSecret, AnnotationOAuthServiceAccountAudience,
		AnnotationOAuthClientID, AnnotationOAuthScope, AnnotationOAuthAudience}
)

// mode reads AnnotationMode and refuses the other mode's annotations.
func mode(ann map[string]string) (string, error) {
	m, set := ann[AnnotationMode]
	if !set {
		m = ModeBroker
	}
	var wrong []string
	switch m {
	case ModeBroker:
		wrong = clusterOnly
	case ModeCluster:
		wrong = brokerOnly
	default:
		return "", fmt.Errorf("annotation %s=%q: want %q or %q", AnnotationMode, m, ModeBroker, ModeCluster)
	}
	for _, key := range wrong {
		if _, ok := ann[key]; ok {
			return "", fmt.Errorf("annotation %s is not used in %s mode (%s=%q)", key, m, AnnotationMode, m)
		}
	}
	return m, nil
}

// cluster reads the cluster annotations; listen is the bootstrap
// listener's port, which the node ports must not cover.
func cluster(ann map[string]string, listen int) (*Cluster, error) {
	b, ok := ann[AnnotationBootstrap]
	if !ok {
		return nil, fmt.Errorf("annotation %s (HOST:PORT of any broker of the cluster) is required with %s=%s", AnnotationBootstrap, AnnotationMode, ModeCluster)
	}
	bootstrap, err := hostPort(b)
	if err != nil {
		return nil, fmt.Errorf("annotation %s=%q: %w", AnnotationBootstrap, b, err)
	}
	c := &Cluster{Bootstrap: bootstrap, NodePortBase: defaultNodePortBase, NodeIDMin: defaultNodeIDMin, NodeIDMax: defaultNodeIDMax}
	if v, ok := ann[AnnotationNodePortBase]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("annotation %s=%q: want a port number", AnnotationNodePortBase, v)
		}
		c.NodePortBase = n
	}
	if v, ok := ann[AnnotationNodeIDs]; ok {
		lo, hi, found := strings.Cut(v, "-")
		first, err1 := strconv.Atoi(lo)
		last, err2 := strconv.Atoi(hi)
		if !found || err1 != nil || err2 != nil || first < 0 || last < first || last > math.MaxInt32 {
			return nil, fmt.Errorf("annotation %s=%q: want MIN-MAX, node ids with 0 <= MIN <= MAX (e.g. 0-99)", AnnotationNodeIDs, v)
		}
		c.NodeIDMin, c.NodeIDMax = first, last
	}
	if err := c.check(listen); err != nil {
		return nil, err
	}
	switch v, ok := ann[AnnotationUpstreamTLS]; {
	case !ok || v == "false":
	case v == "true":
		c.UpstreamTLS = true
	default:
		return nil, fmt.Errorf("annotation %s=%q: want \"true\" or \"false\"", AnnotationUpstreamTLS, v)
	}
	if name, ok := ann[AnnotationUpstreamCASecret]; ok {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("annotation %s=%q: want a Secret's name: %s", AnnotationUpstreamCASecret, name, strings.Join(errs, "; "))
		}
		if ann[AnnotationUpstreamTLS] == "false" {
			return nil, fmt.Errorf("annotation %s needs TLS to the brokers, and %s is \"false\"", AnnotationUpstreamCASecret, AnnotationUpstreamTLS)
		}
		c.UpstreamTLS, c.UpstreamCASecret = true, name
	}
	if err := saslUpstream(ann, c); err != nil {
		return nil, err
	}
	if err := oauthUpstream(ann, c); err != nil {
		return nil, err
	}
	if err := clientRack(ann, c); err != nil {
		return nil, err
	}
	return c, nil
}

// check refuses the ports kproxy would refuse (cluster.Config's
// Validate, and kproxy.yaml's admin and listen ports), so that a bad
// annotation fails at injection rather than in the pod.
func (c *Cluster) check(listen int) error {
	if n := c.NodeIDMax - c.NodeIDMin + 1; n > maxNodePorts {
		return fmt.Errorf("annotation %s=\"%d-%d\" spans %d node ids; kproxy serves at most %d (each is a bound port)",
			AnnotationNodeIDs, c.NodeIDMin, c.NodeIDMax, n, maxNodePorts)
	}
	last := c.NodePortBase + c.NodeIDMax - c.NodeIDMin
	if last > 65535 {
		return fmt.Errorf("node ports %d-%d (%s %d, %s %d-%d) go past 65535",
			c.NodePortBase, last, AnnotationNodePortBase, c.NodePortBase, AnnotationNodeIDs, c.NodeIDMin, c.NodeIDMax)
	}
	for _, p := range []struct {
		name string
		port int
	}{{"the bootstrap listener's port " + AnnotationListenPort, listen}, {"the admin port", ClusterAdminPort}} {
		if p.port >= c.NodePortBase && p.port <= last {
			return fmt.Errorf("node ports %d-%d (%s %d, %s %d-%d) include %s %d",
				c.NodePortBase, last, AnnotationNodePortBase, c.NodePortBase, AnnotationNodeIDs, c.NodeIDMin, c.NodeIDMax, p.name, p.port)
		}
	}
	if listen == ClusterAdminPort {
		return fmt.Errorf("annotation %s=%d: that is the admin port", AnnotationListenPort, listen)
	}
	return nil
}

// hostPort checks a bootstrap address: a DNS name or an IP address, and a
// port. One address: proxy.upstream takes one, and any broker of the
// cluster (or a bootstrap name resolving to several) will do.
func hostPort(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("want HOST:PORT: %v", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("want HOST:PORT with a port number, not %q", port)
	}
	if net.ParseIP(host) == nil {
		if errs := validation.IsDNS1123Subdomain(strings.ToLower(host)); len(errs) > 0 {
			return "", fmt.Errorf("want HOST:PORT with a DNS name or an IP address as HOST: %s", strings.Join(errs, "; "))
		}
	}
	return net.JoinHostPort(host, port), nil
}

// ClusterConfig is the kproxy.yaml of a client-pod sidecar: the bootstrap
// listener on loopback (the application bootstraps from
// 127.0.0.1:a.Listen), the cluster behind it, one loopback listener per
// node id, and the admin port on the pod's address for the probes. TLS
// from the application, when asked, comes from the --tls-cert and
// --tls-key flags, as in broker mode.
func ClusterConfig(a Asked) string {
	c := a.Cluster
	return fmt.Sprintf(`# kproxy.yaml of a client-pod sidecar, written by kproxy-inject from the
# pod's kproxy.io/ annotations: change those, not this.
proxy:
  listen: 127.0.0.1:%d
  upstream: %q
  # The application's containers stop before this native sidecar does.
  drain_timeout: 10s
cluster:
  node_port_base: %d
  node_ids: {min: %d, max: %d}
admin:
  listen: 0.0.0.0:%d
log:
  level: info
  format: json
tracing:
  # Turned on by OTEL_EXPORTER_OTLP_ENDPOINT.
  enabled: false
  sample_ratio: 0.05
`, a.Listen, c.Bootstrap, c.NodePortBase, c.NodeIDMin, c.NodeIDMax, ClusterAdminPort) + upstreamTLS(c) + saslSection(c) + oauthSection(c)
}

// upstreamTLS is the tls: section of a client-pod kproxy.yaml, if any.
func upstreamTLS(c *Cluster) string {
	switch {
	case c.UpstreamCASecret != "":
		return fmt.Sprintf(`tls:
  # TLS to the brokers, verified against the Secret %s's ca.crt.
  upstream:
    ca_file: %s/ca.crt
`, c.UpstreamCASecret, UpstreamCADir)
	case c.UpstreamTLS:
		return `tls:
  # TLS to the brokers, verified against the system roots.
  upstream: {}
`
	}
	return ""
}

// clusterConfigVolume shows AnnotationClusterConfig as kproxy.yaml.
func clusterConfigVolume() corev1.Volume {
	return corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items: []corev1.DownwardAPIVolumeFile{{
			Path:     "kproxy.yaml",
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + AnnotationClusterConfig + "']"},
		}},
	}}}
}
