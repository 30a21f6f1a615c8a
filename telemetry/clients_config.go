package telemetry

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// ClientsConfig is telemetry.clients: the metrics Kafka clients push
// (KIP-714), answered by kproxy and exported over OTLP.
type ClientsConfig struct {
	// Enabled makes kproxy offer GetTelemetrySubscriptions and
	// PushTelemetry in ApiVersions and answer both itself; nothing of
	// them reaches the broker.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the OTLP metrics endpoint: a full URL for http/protobuf
	// (".../v1/metrics"; a URL without a path gets it), host:port or a
	// URL for grpc. Empty: the tracing collector's.
	// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT wins.
	Endpoint string `yaml:"endpoint"`
	// Protocol is grpc or http/protobuf; empty: the tracing protocol.
	// OTEL_EXPORTER_OTLP_METRICS_PROTOCOL wins.
	Protocol string `yaml:"protocol"`
	// PushInterval is how often clients are asked to push.
	PushInterval time.Duration `yaml:"push_interval"`
	// MaxBytes is the subscription's telemetry_max_bytes: the largest
	// push accepted, compressed and inflated alike.
	MaxBytes int `yaml:"max_bytes"`
	// Metrics are the metric name prefixes requested; [""] asks for all.
	Metrics []string `yaml:"metrics"`
}

// Bounds of the subscription, as Kafka bounds a client-metrics
// resource's interval.ms and the broker's telemetry.max.bytes.
const (
	minPushInterval = 100 * time.Millisecond
	maxPushInterval = time.Hour
	maxMaxBytes     = 64 << 20
)

func clientsDefaults() ClientsConfig {
	return ClientsConfig{PushInterval: 30 * time.Second, MaxBytes: 1 << 20, Metrics: []string{"org.apache.kafka."}}
}

func (c ClientsConfig) validate() error {
	switch {
	case c.PushInterval < minPushInterval || c.PushInterval > maxPushInterval:
		return fielderr.New("clients.push_interval", fmt.Sprintf("must be between %v and %v", minPushInterval, maxPushInterval))
	case c.MaxBytes < 1 || c.MaxBytes > maxMaxBytes:
		return fielderr.New("clients.max_bytes", fmt.Sprintf("must be between 1 and %d", maxMaxBytes))
	case c.Protocol != "" && c.Protocol != "grpc" && c.Protocol != "http/protobuf":
		return fielderr.New("clients.protocol", "must be grpc or http/protobuf")
	case c.Protocol == "http/protobuf" && c.Endpoint != "" && !httpURL(c.Endpoint):
		return fielderr.New("clients.endpoint", "http/protobuf wants an http(s) URL")
	}
	if len(c.Metrics) > 1 {
		for _, m := range c.Metrics {
			if m == "" {
				return fielderr.New("clients.metrics", `"" (every metric) goes alone`)
			}
		}
	}
	return nil
}

// Collector is where pushed metrics go, after the environment has been
// applied over the file and the tracing collector filled what both left
// empty.
type Collector struct {
	Protocol string // grpc or http/protobuf
	Endpoint string // a URL for http/protobuf; host:port or a URL for grpc
}

// Collector resolves c's destination. tracingEndpoint and tracingProtocol
// are the tracing section's, the defaults; getenv reads the environment.
func (c ClientsConfig) Collector(tracingEndpoint, tracingProtocol string, getenv func(string) string) (Collector, error) {
	out := Collector{Protocol: c.Protocol, Endpoint: c.Endpoint}
	if out.Protocol == "" {
		out.Protocol = tracingProtocol
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(k); v != "" {
			if k == "OTEL_EXPORTER_OTLP_PROTOCOL" && c.Protocol != "" {
				break // the file's own protocol for metrics beats the general one
			}
			out.Protocol = v
			break
		}
	}
	if out.Protocol == "" {
		out.Protocol = "grpc"
	}
	if out.Protocol != "grpc" && out.Protocol != "http/protobuf" {
		return out, fmt.Errorf("telemetry.clients: protocol %q: kproxy exports over grpc or http/protobuf", out.Protocol)
	}
	fromBase := false // a base URL, which gets the metrics path
	switch {
	case getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "":
		out.Endpoint = getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
	case out.Endpoint != "":
	case getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "":
		out.Endpoint, fromBase = getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), true
	case tracingEndpoint != "":
		out.Endpoint, fromBase = tracingEndpoint, true
	case out.Protocol == "grpc":
		out.Endpoint = "localhost:4317"
	default:
		out.Endpoint = "http://localhost:4318"
	}
	if out.Protocol == "http/protobuf" {
		if !httpURL(out.Endpoint) {
			return out, fmt.Errorf("telemetry.clients: endpoint %q: http/protobuf wants an http(s) URL", out.Endpoint)
		}
		u, _ := url.Parse(out.Endpoint)
		switch {
		case u.Path == "" || u.Path == "/":
			u.Path = "/v1/metrics"
		case fromBase && strings.HasSuffix(u.Path, "/v1/traces"):
			u.Path = strings.TrimSuffix(u.Path, "/v1/traces") + "/v1/metrics"
		case fromBase:
			u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/metrics"
		}
		out.Endpoint = u.String()
	}
	return out, nil
}

// httpURL reports whether s is an absolute http or https URL.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
