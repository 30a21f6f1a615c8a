// Package inject adds kproxy as a native sidecar to Deployments and
// StatefulSets that ask for it with the kproxy.io/inject annotation, for
// the kproxy-inject command and its admission webhook. It is a module of
// its own so the Kubernetes types stay out of the proxy's binary.
package inject

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Annotations read from the pod template (or, failing that, the workload).
const (
	AnnotationInject       = "kproxy.io/inject"        // "true" to inject
	AnnotationListenPort   = "kproxy.io/listen-port"   // kproxy's client port, default 9092
	AnnotationUpstreamPort = "kproxy.io/upstream-port" // the broker's loopback port, default 19092
)

// Options are what the injector is told rather than the workload.
type Options struct {
	Image     string // kproxy's image
	ConfigMap string // the ConfigMap holding kproxy.yaml
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
	configDir     = "/etc/kproxy"
	adminPort     = 9190
)

// ports reads the port annotations.
func ports(ann map[string]string) (listen, upstream int, err error) {
	listen, upstream = 9092, 19092
	for key, p := range map[string]*int{AnnotationListenPort: &listen, AnnotationUpstreamPort: &upstream} {
		if v, ok := ann[key]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				return 0, 0, fmt.Errorf("annotation %s=%q: want a port number", key, v)
			}
			*p = n
		}
	}
	if listen == upstream || listen == adminPort || upstream == adminPort {
		return 0, 0, fmt.Errorf("listen port %d, upstream port %d and admin port %d must differ", listen, upstream, adminPort)
	}
	return listen, upstream, nil
}

// Sidecar is kproxy's container: a native sidecar (restartPolicy Always)
// listening on listen and forwarding to the broker on 127.0.0.1:upstream.
func Sidecar(o Options, listen, upstream int) corev1.Container {
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
	return corev1.Container{
		Name:            ContainerName,
		Image:           o.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		RestartPolicy:   &always,
		Args: []string{"run", "--config", configDir + "/kproxy.yaml",
			"--listen", fmt.Sprintf("0.0.0.0:%d", listen), "--upstream", fmt.Sprintf("127.0.0.1:%d", upstream)},
		Ports: []corev1.ContainerPort{
			{Name: "kafka", ContainerPort: int32(listen)},
			{Name: "kproxy-admin", ContainerPort: adminPort},
		},
		Env:            env,
		StartupProbe:   startup,
		LivenessProbe:  liveness,
		ReadinessProbe: readiness,
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
		VolumeMounts: []corev1.VolumeMount{{Name: VolumeName, MountPath: configDir, ReadOnly: true}},
	}
}
