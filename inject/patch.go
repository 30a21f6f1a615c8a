package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// Patch is the JSON Patch that injects the sidecar into the workload in
// raw, or nil when there is nothing to do (another kind, no annotation, or
// the sidecar and volume already as they would be made). Its operations
// touch only the init containers and volumes, by whole element, so they
// apply to the object exactly as the user or the API server wrote it.
func Patch(raw []byte, o Options, strict bool) ([]jsonpatch.Operation, error) {
	ok, err := wants(raw, strict)
	if err != nil || !ok {
		return nil, err
	}
	var obj struct {
		Spec struct {
			Template struct {
				Spec struct {
					InitContainers []json.RawMessage `json:"initContainers"`
					Volumes        []json.RawMessage `json:"volumes"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	ann, err := annotations(raw)
	if err != nil {
		return nil, err
	}
	listen, upstream, err := ports(ann)
	if err != nil {
		return nil, err
	}
	pod := "/spec/template/spec"
	sidecar := Sidecar(o, listen, upstream)
	vol := corev1.Volume{Name: VolumeName, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: o.ConfigMap}}}}
	var ops []jsonpatch.Operation
	ops, err = ensure(ops, pod+"/initContainers", obj.Spec.Template.Spec.InitContainers, ContainerName, sidecar, true)
	if err != nil {
		return nil, err
	}
	return ensure(ops, pod+"/volumes", obj.Spec.Template.Spec.Volumes, VolumeName, vol, false)
}

// ensure adds the operation that puts want (named name) in the list at
// path: nothing if an element of that name already equals it, a replace if
// it differs, else an add (first or last).
func ensure[T any](ops []jsonpatch.Operation, path string, list []json.RawMessage, name string, want T, first bool) ([]jsonpatch.Operation, error) {
	for i, el := range list {
		var named struct{ Name string }
		if err := json.Unmarshal(el, &named); err != nil {
			return nil, err
		}
		if named.Name != name {
			continue
		}
		var have T
		if err := json.Unmarshal(el, &have); err == nil && reflect.DeepEqual(have, want) {
			return ops, nil
		}
		return append(ops, jsonpatch.NewOperation("replace", fmt.Sprintf("%s/%d", path, i), want)), nil
	}
	switch {
	case list == nil:
		return append(ops, jsonpatch.NewOperation("add", path, []T{want})), nil
	case first:
		return append(ops, jsonpatch.NewOperation("add", path+"/0", want)), nil
	default:
		return append(ops, jsonpatch.NewOperation("add", path+"/-", want)), nil
	}
}
