// Package inject adds kproxy as a native sidecar to Deployments and
// StatefulSets that ask for it with the kproxy.io/inject annotation, for
// the kproxy-inject command and its admission webhook. It is a module of
// its own so the Kubernetes types stay out of the proxy's binary.
package inject

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations read from the pod template (or, failing that, the workload).
const (
	AnnotationInject       = "kproxy.io/inject"        // "true" to inject
	AnnotationListenPort   = "kproxy.io/listen-port"   // kproxy's client port, default 9092
	AnnotationUpstreamPort = "kproxy.io/upstream-port" // the broker's loopback port, default 19092
	// AnnotationTLSSecret names a kubernetes.io/tls Secret in the
	// workload's namespace: kproxy then terminates TLS from clients with
	// its tls.crt and tls.key. Unset: plaintext.
	AnnotationTLSSecret = "kproxy.io/tls-secret"
)

// Asked is what a workload's annotations ask of its sidecar.
type Asked struct {
	Listen   int    // kproxy's client port
	Upstream int    // the broker's port on 127.0.0.1 (broker mode)
	Secret   string // the TLS Secret's name; empty: plaintext
	// Cluster, when set, is the client-pod shape (kproxy.io/mode:
	// cluster): kproxy listens on 127.0.0.1:Listen in front of the whole
	// cluster. Nil: the broker-pod shape.
	Cluster *Cluster
}

// asked reads the annotations.
func asked(ann map[string]string) (Asked, error) {
	m, err := mode(ann)
	if err != nil {
		return Asked{}, err
	}
	var a Asked
	if m == ModeCluster {
		if a.Listen, err = port(ann, AnnotationListenPort, 9092); err != nil {
			return Asked{}, err
		}
		if a.Cluster, err = cluster(ann, a.Listen); err != nil {
			return Asked{}, err
		}
	} else {
		listen, upstream, err := ports(ann)
		if err != nil {
			return Asked{}, err
		}
		a = Asked{Listen: listen, Upstream: upstream}
	}
	if name, ok := ann[AnnotationTLSSecret]; ok {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return Asked{}, fmt.Errorf("annotation %s=%q: want a Secret's name: %s", AnnotationTLSSecret, name, strings.Join(errs, "; "))
		}
		a.Secret = name
	}
	return a, nil
}

// Options are what the injector is told rather than the workload.
type Options struct {
	Image     string // kproxy's image
	ConfigMap string // the ConfigMap holding kproxy.yaml (broker mode; cluster mode's is generated)
	OTLP      string // OTEL_EXPORTER_OTLP_ENDPOINT for the sidecar; empty leaves tracing off
}

// Defaults match examples/k8s.
func Defaults() Options {
	return Options{Image: "kproxy:dev", ConfigMap: "kproxy-config", OTLP: "http://jaeger:4317"}
}

// Names the injector owns in a pod spec; injecting replaces them, so doing
// it twice changes nothing.
const (
	ContainerName = "kproxy"
	VolumeName    = "kproxy-config"
	TLSVolumeName = "kproxy-tls" // the TLS Secret's volume
	configDir     = "/etc/kproxy"
	adminPort     = 9190
)

// TLSDir is where the TLS Secret is mounted in the sidecar: whole, never
// with subPath, so the kubelet's update of a renewed Secret (a swap of
// the volume's ..data symlink) reaches kproxy, which reloads it. The
// sidecar is run with --tls-cert TLSDir/tls.crt --tls-key TLSDir/tls.key,
// over the ConfigMap's kproxy.yaml; that file may add the rest of
// tls.listener (client_ca_file: /etc/kproxy/tls/ca.crt for mTLS).
const TLSDir = configDir + "/tls"

// ports reads the port annotations of broker mode.
func ports(ann map[string]string) (listen, upstream int, err error) {
	if listen, err = port(ann, AnnotationListenPort, 9092); err != nil {
		return 0, 0, err
	}
	if upstream, err = port(ann, AnnotationUpstreamPort, 19092); err != nil {
		return 0, 0, err
	}
	if listen == upstream || listen == adminPort || upstream == adminPort {
		return 0, 0, fmt.Errorf("listen port %d, upstream port %d and admin port %d must differ", listen, upstream, adminPort)
	}
	return listen, upstream, nil
}

// port reads the port annotation key, def when it is absent.
func port(ann map[string]string, key string, def int) (int, error) {
	v, ok := ann[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("annotation %s=%q: want a port number", key, v)
	}
	return n, nil
}

// Sidecar is kproxy's container: a native sidecar (restartPolicy Always)
// listening on a.Listen and forwarding to the broker on
// 127.0.0.1:a.Upstream, with TLS from clients when a.Secret is set. In
// cluster mode it runs with the generated kproxy.yaml alone (plus the TLS
// flags).
func Sidecar(o Options, a Asked) corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	yes, no := true, false
	uid := int64(65532)
	admin := intstr.FromString("kproxy-admin")
	get := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: admin}}}
	}
	startup, liveness, readiness := get("/healthz"), get("/healthz"), get("/readyz")
	startup.PeriodSeconds, startup.FailureThreshold = 1, 30
	liveness.PeriodSeconds = 10
	readiness.PeriodSeconds = 5
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	env := []corev1.EnvVar{
		field("POD_NAME", "metadata.name"),
		field("POD_NAMESPACE", "metadata.namespace"),
		field("NODE_NAME", "spec.nodeName"),
	}
	if a.Cluster != nil {
		// The client pod's zone, for zone-aware fetching; a broker pod's
		// clients are elsewhere, in zones of their own.
		env = append(env, a.Cluster.rackEnv())
	}
	if o.OTLP != "" {
		env = append(env,
			corev1.EnvVar{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: o.OTLP},
			corev1.EnvVar{Name: "OTEL_EXPORTER_OTLP_PROTOCOL", Value: "grpc"},
		)
	}
	env = append(env,
		corev1.EnvVar{Name: "OTEL_SERVICE_NAME", Value: "kproxy"},
		corev1.EnvVar{Name: "OTEL_RESOURCE_ATTRIBUTES", Value: "k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),k8s.node.name=$(NODE_NAME)"},
	)
	listen, upstream := a.Listen, a.Upstream
	args := []string{"run", "--config", configDir + "/kproxy.yaml",
		"--listen", fmt.Sprintf("0.0.0.0:%d", listen), "--upstream", fmt.Sprintf("127.0.0.1:%d", upstream)}
	ports := []corev1.ContainerPort{
		{Name: "kafka", ContainerPort: int32(listen)},
		{Name: "kproxy-admin", ContainerPort: adminPort},
	}
	if a.Cluster != nil {
		// Everything is in the generated kproxy.yaml (ClusterConfig); the
		// Kafka listeners are on loopback, for the pod's own containers.
		args = args[:3]
		ports = []corev1.ContainerPort{{Name: "kproxy-admin", ContainerPort: ClusterAdminPort}}
	}
	mounts := []corev1.VolumeMount{{Name: VolumeName, MountPath: configDir, ReadOnly: true}}
	if a.Secret != "" {
		args = append(args, "--tls-cert", TLSDir+"/tls.crt", "--tls-key", TLSDir+"/tls.key")
		mounts = append(mounts, corev1.VolumeMount{Name: TLSVolumeName, MountPath: TLSDir, ReadOnly: true})
	}
	if a.Cluster != nil && a.Cluster.UpstreamCASecret != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: UpstreamCAVolumeName, MountPath: UpstreamCADir, ReadOnly: true})
	}
	if a.Cluster != nil && a.Cluster.SASLSecret != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: SASLVolumeName, MountPath: SASLDir, ReadOnly: true})
	}
	if a.Cluster != nil && a.Cluster.OAuth != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: OAuthVolumeName, MountPath: OAuthDir, ReadOnly: true})
	}
	return corev1.Container{
		Name:            ContainerName,
		Image:           o.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		RestartPolicy:   &always,
		Args:            args,
		Ports:           ports,
		Env:             env,
		StartupProbe:    startup,
		LivenessProbe:   liveness,
		ReadinessProbe:  readiness,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             &yes,
			RunAsUser:                &uid,
			RunAsGroup:               &uid,
			ReadOnlyRootFilesystem:   &yes,
			AllowPrivilegeEscalation: &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		VolumeMounts: mounts,
	}
}

// Volumes are the pod volumes the sidecar mounts: the ConfigMap (in
// cluster mode, the generated kproxy.yaml from the pod's annotation
// instead) and, when asked, the TLS Secret, the brokers' CA Secret and
// the SASL credentials Secret.
func Volumes(o Options, a Asked) []corev1.Volume {
	v := []corev1.Volume{{Name: VolumeName, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: o.ConfigMap}}}}}
	if a.Cluster != nil {
		v[0] = clusterConfigVolume()
	}
	if a.Secret != "" {
		v = append(v, corev1.Volume{Name: TLSVolumeName, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: a.Secret}}})
	}
	if a.Cluster != nil && a.Cluster.UpstreamCASecret != "" {
		v = append(v, corev1.Volume{Name: UpstreamCAVolumeName, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: a.Cluster.UpstreamCASecret}}})
	}
	if a.Cluster != nil && a.Cluster.SASLSecret != "" {
		v = append(v, saslVolume(a.Cluster))
	}
	if a.Cluster != nil && a.Cluster.OAuth != nil {
		v = append(v, oauthVolume(a.Cluster.OAuth))
	}
	return v
}
