package telemetry

import (
	"github.com/google/uuid"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
)

// resourceAttrs are the attributes kproxy adds to the resource of pushed
// metrics. The client's names are KIP-714's (the labels a broker plugin
// receives); the pod's are OpenTelemetry's k8s.* conventions.
type resourceAttrs []*commonpb.KeyValue

// podAttrs reads the pod, namespace and node names as the downward API
// passes them (kproxy-inject's names, then OpenTelemetry's).
func podAttrs(getenv func(string) string) resourceAttrs {
	var out resourceAttrs
	for _, e := range []struct {
		key  string
		vars []string
	}{
		{"k8s.pod.name", []string{"K8S_POD_NAME", "POD_NAME"}},
		{"k8s.namespace.name", []string{"K8S_NAMESPACE_NAME", "POD_NAMESPACE"}},
		{"k8s.node.name", []string{"K8S_NODE_NAME", "NODE_NAME"}},
	} {
		for _, name := range e.vars {
			if v := getenv(name); v != "" {
				out = append(out, str(e.key, v))
				break
			}
		}
	}
	return out
}

// addTo adds kproxy's attributes to rm's resource, keeping any the client
// set itself. service.name and service.instance.id default to the client
// id and instance id, so backends that key series by them (Prometheus'
// job and instance) tell clients apart.
func (a resourceAttrs) addTo(rm *metricspb.ResourceMetrics, meta ClientMeta, instance [16]byte) {
	if rm.Resource == nil {
		rm.Resource = &resourcepb.Resource{}
	}
	id := uuid.UUID(instance).String()
	have := make(map[string]bool, len(rm.Resource.Attributes))
	for _, kv := range rm.Resource.Attributes {
		have[kv.Key] = true
	}
	add := func(kv *commonpb.KeyValue) {
		if !have[kv.Key] && kv.Value.GetStringValue() != "" {
			rm.Resource.Attributes = append(rm.Resource.Attributes, kv)
			have[kv.Key] = true
		}
	}
	add(str("client_id", meta.ClientID))
	add(str("client_instance_id", id))
	add(str("client_source_address", meta.Address))
	add(str("principal", meta.Principal))
	add(str("service.name", meta.ClientID))
	add(str("service.instance.id", id))
	for _, kv := range a {
		add(kv)
	}
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}
