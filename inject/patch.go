package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// Patch is the JSON Patch that injects the sidecar into the workload in
// raw, or nil when there is nothing to do (another kind, no annotation, or
// the sidecar and volumes already as they would be made). Its operations
// touch only the init containers and volumes, by whole element, and in
// cluster mode the pod template's AnnotationClusterConfig, so they apply
// to the object exactly as the user or the API server wrote it. A TLS,
// CA or SASL Secret volume, or a generated config annotation, left from
// an injection whose annotation is gone is removed.
func Patch(raw []byte, o Options, strict bool) ([]jsonpatch.Operation, error) {
	ok, err := wants(raw, strict)
	if err != nil || !ok {
		return nil, err
	}
	var obj struct {
		Spec struct {
			Template struct {
				Metadata *templateMeta `json:"metadata"`
				Spec     struct {
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
	a, err := asked(ann)
	if err != nil {
		return nil, err
	}
	pod := "/spec/template/spec"
	ops := config(nil, obj.Spec.Template.Metadata, a)
	ops, err = ensure(ops, pod+"/initContainers", obj.Spec.Template.Spec.InitContainers, ContainerName, Sidecar(o, a), true)
	if err != nil {
		return nil, err
	}
	vols := obj.Spec.Template.Spec.Volumes
	if vols == nil {
		// No volumes yet: one add of them all, as a later add needs the list.
		return append(ops, jsonpatch.NewOperation("add", pod+"/volumes", Volumes(o, a))), nil
	}
	for _, v := range Volumes(o, a) {
		if ops, err = ensure(ops, pod+"/volumes", vols, v.Name, v, false); err != nil {
			return nil, err
		}
	}
	var unasked []string
	if a.Secret == "" {
		unasked = append(unasked, TLSVolumeName)
	}
	if a.Cluster == nil || a.Cluster.UpstreamCASecret == "" {
		unasked = append(unasked, UpstreamCAVolumeName)
	}
	if a.Cluster == nil || a.Cluster.SASLSecret == "" {
		unasked = append(unasked, SASLVolumeName)
	}
	if a.Cluster == nil || a.Cluster.OAuth == nil {
		unasked = append(unasked, OAuthVolumeName)
	}
	// After the replaces above, so their indexes still hold.
	return drop(ops, pod+"/volumes", vols, unasked...)
}

// drop adds the removal of the elements named names from the list at
// path, those there are: last first, so each index holds when its
// removal runs.
func drop(ops []jsonpatch.Operation, path string, list []json.RawMessage, names ...string) ([]jsonpatch.Operation, error) {
	for i := len(list) - 1; i >= 0; i-- {
		var named struct{ Name string }
		if err := json.Unmarshal(list[i], &named); err != nil {
			return nil, err
		}
		if slices.Contains(names, named.Name) {
			ops = append(ops, jsonpatch.NewOperation("remove", fmt.Sprintf("%s/%d", path, i), nil))
		}
	}
	return ops, nil
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

// templateMeta is the part of a pod template's metadata config reads.
type templateMeta struct {
	Annotations map[string]string `json:"annotations"`
}

// config adds the operations that make the pod template's
// AnnotationClusterConfig what a asks: the generated kproxy.yaml in
// cluster mode, absent in broker mode. meta is the template's metadata,
// nil when it has none.
func config(ops []jsonpatch.Operation, meta *templateMeta, a Asked) []jsonpatch.Operation {
	const path = "/spec/template/metadata"
	var have string
	var present bool
	if meta != nil {
		have, present = meta.Annotations[AnnotationClusterConfig]
	}
	key := path + "/annotations/" + strings.ReplaceAll(strings.ReplaceAll(AnnotationClusterConfig, "~", "~0"), "/", "~1")
	if a.Cluster == nil {
		switch {
		case present && len(meta.Annotations) == 1: // ours alone: as before injection
			return append(ops, jsonpatch.NewOperation("remove", path+"/annotations", nil))
		case present:
			return append(ops, jsonpatch.NewOperation("remove", key, nil))
		}
		return ops
	}
	want := ClusterConfig(a)
	switch {
	case present && have == want:
		return ops
	case meta == nil:
		return append(ops, jsonpatch.NewOperation("add", path, map[string]any{"annotations": map[string]string{AnnotationClusterConfig: want}}))
	case meta.Annotations == nil:
		return append(ops, jsonpatch.NewOperation("add", path+"/annotations", map[string]string{AnnotationClusterConfig: want}))
	default: // add replaces a member that is there
		return append(ops, jsonpatch.NewOperation("add", key, want))
	}
}
