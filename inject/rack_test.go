package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// rackOf is the sidecar's KPROXY_CLIENT_RACK for asked, or nil.
func rackOf(a Asked) *corev1.EnvVar {
	for _, e := range Sidecar(Defaults(), a).Env {
		if e.Name == ClientRackEnv {
			return &e
		}
	}
	return nil
}

// A client-pod sidecar takes its zone from the pod's label through the
// downward API, or from kproxy.io/client-rack; a broker-pod sidecar gets
// none, and the annotation there is an error.
func TestClientRackEnv(t *testing.T) {
	base := map[string]string{AnnotationMode: ModeCluster, AnnotationBootstrap: "kafka:9092"}
	c, err := cluster(base, 9092)
	if err != nil {
		t.Fatal(err)
	}
	e := rackOf(Asked{Listen: 9092, Cluster: c})
	if e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
		e.ValueFrom.FieldRef.FieldPath != "metadata.labels['topology.kubernetes.io/zone']" {
		t.Fatalf("cluster mode without the annotation: %+v, want the zone label through the downward API", e)
	}

	for _, v := range []string{"europe-west1-b", ""} {
		ann := map[string]string{AnnotationClientRack: v}
		for k, x := range base {
			ann[k] = x
		}
		c, err := cluster(ann, 9092)
		if err != nil {
			t.Fatal(err)
		}
		if e := rackOf(Asked{Listen: 9092, Cluster: c}); e == nil || e.ValueFrom != nil || e.Value != v {
			t.Fatalf("%s=%q: %+v, want the value itself", AnnotationClientRack, v, e)
		}
	}

	if e := rackOf(Asked{Listen: 9092, Upstream: 19092}); e != nil {
		t.Fatalf("broker mode: %+v, want no rack", e)
	}
	if _, err := mode(map[string]string{AnnotationClientRack: "zone-a"}); err == nil || !strings.Contains(err.Error(), AnnotationClientRack) {
		t.Fatalf("the annotation in broker mode: %v, want an error naming it", err)
	}
	for _, bad := range []string{" zone-a", strings.Repeat("z", 256), "zone\n"} {
		ann := map[string]string{AnnotationClientRack: bad}
		for k, x := range base {
			ann[k] = x
		}
		if _, err := cluster(ann, 9092); err == nil || !strings.Contains(err.Error(), AnnotationClientRack) {
			t.Fatalf("%s=%q: %v, want an error naming it", AnnotationClientRack, bad, err)
		}
	}
}
