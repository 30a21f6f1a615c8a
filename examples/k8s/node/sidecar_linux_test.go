//go:build linux && nodetest

package node_test

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// kproxySidecar is the kproxy container as the examples run it: a native
// sidecar (an init container with restartPolicy Always, started and
// through its startup probe before the app starts, stopped after it),
// its configuration from a ConfigMap volume, probes on the admin port,
// non-root with a read-only root filesystem.
func kproxySidecar(configMap string) corev1.Container {
	return corev1.Container{
		Name:            "kproxy",
		Image:           kproxyImage,
		ImagePullPolicy: corev1.PullNever,
		RestartPolicy:   &always,
		Args:            []string{"run", "--config", "/etc/kproxy/kproxy.yaml"},
		Ports: []corev1.ContainerPort{
			{Name: "kafka", ContainerPort: 9092},
			{Name: "kproxy-admin", ContainerPort: 9190},
		},
		Env: []corev1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		},
		StartupProbe: &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("kproxy-admin")}},
			PeriodSeconds:    1,
			FailureThreshold: 30,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("kproxy-admin")}},
			PeriodSeconds: 2,
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "kproxy-config", MountPath: "/etc/kproxy"}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             boolp(true),
			RunAsUser:                int64p(65532),
			RunAsGroup:               int64p(65532),
			ReadOnlyRootFilesystem:   boolp(true),
			AllowPrivilegeEscalation: boolp(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// configVolume mounts the ConfigMap that holds kproxy.yaml.
func configVolume(configMap string) corev1.Volume {
	return corev1.Volume{Name: "kproxy-config", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}},
	}}
}

// appContainer runs the app image with args.
func appContainer(args ...string) corev1.Container {
	return corev1.Container{
		Name:            "app",
		Image:           appImage,
		ImagePullPolicy: corev1.PullNever,
		Args:            args,
		SecurityContext: &corev1.SecurityContext{RunAsNonRoot: boolp(true), RunAsUser: int64p(65532)},
	}
}
