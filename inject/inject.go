package inject

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Workload decodes a Deployment or StatefulSet from JSON, adds the
// sidecar if its annotations ask for it, and returns the object before and
// after as JSON (both through the same types, so they differ only by the
// injection). ok is false for other kinds and for workloads that did not
// ask.
func Workload(raw []byte, o Options, strict bool) (before, after []byte, ok bool, err error) {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, nil, false, err
	}
	var obj any
	var tmpl *corev1.PodTemplateSpec
	var objMeta *metav1.ObjectMeta
	switch meta.APIVersion + " " + meta.Kind {
	case "apps/v1 Deployment":
		d := &appsv1.Deployment{}
		obj, tmpl, objMeta = d, &d.Spec.Template, &d.ObjectMeta
	case "apps/v1 StatefulSet":
		s := &appsv1.StatefulSet{}
		obj, tmpl, objMeta = s, &s.Spec.Template, &s.ObjectMeta
	default:
		return nil, nil, false, nil
	}
	dec := json.NewDecoder(bytesReader(raw))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(obj); err != nil {
		return nil, nil, false, fmt.Errorf("%s: %w", meta.Kind, err)
	}
	if before, err = json.Marshal(obj); err != nil {
		return nil, nil, false, err
	}
	ann := tmpl.Annotations
	if _, set := ann[AnnotationInject]; !set {
		ann = objMeta.Annotations
	}
	if ann[AnnotationInject] != "true" {
		return before, before, false, nil
	}
	listen, upstream, err := ports(ann)
	if err != nil {
		return nil, nil, false, fmt.Errorf("%s %s: %w", meta.Kind, objMeta.Name, err)
	}
	Pod(&tmpl.Spec, o, listen, upstream)
	after, err = json.Marshal(obj)
	return before, after, true, err
}

// Pod puts the sidecar and its config volume in spec, replacing any that
// an earlier injection put there, so injecting twice is injecting once.
func Pod(spec *corev1.PodSpec, o Options, listen, upstream int) {
	c := Sidecar(o, listen, upstream)
	replaced := false
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == ContainerName {
			spec.InitContainers[i], replaced = c, true
		}
	}
	if !replaced {
		// First, so it is up before any other init container talks to the broker.
		spec.InitContainers = append([]corev1.Container{c}, spec.InitContainers...)
	}
	v := corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: o.ConfigMap}}}}
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == VolumeName {
			spec.Volumes[i] = v
			return
		}
	}
	spec.Volumes = append(spec.Volumes, v)
}
