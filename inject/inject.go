package inject

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// wants decodes a Deployment or StatefulSet from JSON (strictly: unknown
// fields fail, for manifests people wrote) and reports whether it asks for
// the sidecar. Other kinds are not for the injector and report false.
func wants(raw []byte, strict bool) (bool, error) {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return false, err
	}
	var obj any
	switch meta.APIVersion + " " + meta.Kind {
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "apps/v1 StatefulSet":
		obj = &appsv1.StatefulSet{}
	default:
		return false, nil
	}
	dec := json.NewDecoder(bytesReader(raw))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(obj); err != nil {
		return false, fmt.Errorf("%s: %w", meta.Kind, err)
	}
	ann, err := annotations(raw)
	if err != nil || ann[AnnotationInject] != "true" {
		return false, err
	}
	if _, err := asked(ann); err != nil {
		return false, fmt.Errorf("%s: %w", meta.Kind, err)
	}
	return true, nil
}

// annotations are the pod template's when it has the inject annotation,
// else the workload's.
func annotations(raw []byte) (map[string]string, error) {
	var obj struct {
		Metadata struct{ Annotations map[string]string } `json:"metadata"`
		Spec     struct {
			Template struct {
				Metadata struct{ Annotations map[string]string } `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	if ann := obj.Spec.Template.Metadata.Annotations; ann[AnnotationInject] != "" {
		return ann, nil
	}
	return obj.Metadata.Annotations, nil
}
