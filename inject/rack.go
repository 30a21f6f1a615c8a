package inject

import (
	"fmt"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
)

// Zone-aware fetching (KIP-392) in cluster mode: kproxy fills its pod's
// zone into the rack id of Fetch requests whose client set none
// (proxy.client_rack, set through KPROXY_CLIENT_RACK).
const (
	// AnnotationClientRack sets the rack id itself, for clusters that do
	// not copy the node's zone label to pods: set it per node pool (a
	// workload pinned to one zone, or one injector configuration per
	// pool). "" turns the fill off.
	AnnotationClientRack = "kproxy.io/client-rack"
	// ZoneLabel is the well-known zone label; where the cluster copies
	// it from the node to the pod (an admission plugin or policy engine
	// does), the sidecar reads it through the downward API.
	ZoneLabel = "topology.kubernetes.io/zone"
	// ClientRackEnv is kproxy's variable for proxy.client_rack.
	ClientRackEnv = "KPROXY_CLIENT_RACK"
)

// maxClientRack is kproxy's bound on proxy.client_rack.
const maxClientRack = 255

// clientRack reads AnnotationClientRack into c: set says it was given
// (its value may be "", no rack).
func clientRack(ann map[string]string, c *Cluster) error {
	v, ok := ann[AnnotationClientRack]
	if !ok {
		return nil
	}
	if len(v) > maxClientRack || v != strings.TrimSpace(v) || strings.ContainsFunc(v, unicode.IsControl) {
		return fmt.Errorf("annotation %s=%q: want a zone name of at most %d bytes, without surrounding spaces", AnnotationClientRack, v, maxClientRack)
	}
	c.ClientRack, c.ClientRackSet = v, true
	return nil
}

// rackEnv is the sidecar's KPROXY_CLIENT_RACK: the annotation's value,
// else the pod's zone label through the downward API (empty, so no fill,
// where the pod has no such label).
func (c *Cluster) rackEnv() corev1.EnvVar {
	if c.ClientRackSet {
		return corev1.EnvVar{Name: ClientRackEnv, Value: c.ClientRack}
	}
	return corev1.EnvVar{Name: ClientRackEnv, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.labels['%s']", ZoneLabel)}}}
}
