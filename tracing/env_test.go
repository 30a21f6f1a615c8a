package tracing

import (
	"strings"
	"testing"
)

// fakeEnv is a getenv over a map, so resolve is tested without touching the
// process environment.
func fakeEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func ratioPtr(r float64) *float64 { return &r }

// With no OTEL_* variables the file alone decides, and the default sampler
// is parent-based always-on.
func TestResolveYAMLOnly(t *testing.T) {
	c := Defaults()
	c.Enabled, c.Endpoint, c.Protocol, c.ServiceName = true, "http://collector:4318", "http/protobuf", "svc"
	c.SampleRatio = ratioPtr(0.5)
	s, err := resolve(c, fakeEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Enabled || s.Endpoint != "http://collector:4318" || s.Protocol != "http/protobuf" || s.ServiceName != "svc" {
		t.Errorf("settings %+v do not match the file", s.Config)
	}
	if s.ratio != 0.5 || !s.parentBased {
		t.Errorf("ratio %v parentBased %v, want 0.5 true", s.ratio, s.parentBased)
	}

	s, err = resolve(Defaults(), fakeEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Enabled || s.ratio != 1 || !s.parentBased {
		t.Errorf("defaults resolved to enabled=%v ratio=%v parentBased=%v", s.Enabled, s.ratio, s.parentBased)
	}
}

// Either endpoint variable turns tracing on and hands the endpoint to the
// exporter, which reads the variable itself.
func TestResolveEndpointEnablesAndClearsYAML(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Run(k, func(t *testing.T) {
			c := Defaults()
			c.Endpoint = "http://from-yaml:4317"
			s, err := resolve(c, fakeEnv(map[string]string{k: "http://from-env:4317"}))
			if err != nil {
				t.Fatal(err)
			}
			if !s.Enabled {
				t.Error("endpoint variable did not enable tracing")
			}
			if s.Endpoint != "" {
				t.Errorf("endpoint %q kept; the environment's must win", s.Endpoint)
			}
		})
	}
}

// OTEL_SDK_DISABLED=true (any case) and OTEL_TRACES_EXPORTER=none switch
// tracing off even when the file or an endpoint turns it on.
func TestResolveDisabled(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_SDK_DISABLED": "true"},
		{"OTEL_SDK_DISABLED": "TRUE"},
		{"OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4317"},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4317"},
	} {
		c := Defaults()
		c.Enabled = true
		s, err := resolve(c, fakeEnv(env))
		if err != nil {
			t.Fatal(err)
		}
		if s.Enabled {
			t.Errorf("%v: tracing still enabled", env)
		}
	}
	c := Defaults()
	c.Enabled = true
	if s, _ := resolve(c, fakeEnv(map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"})); !s.Enabled {
		t.Error("OTEL_SDK_DISABLED=false / OTEL_TRACES_EXPORTER=otlp disabled tracing")
	}
}

// The traces-specific protocol variable wins over the general one; only
// the two protocols kproxy builds exporters for are accepted.
func TestResolveProtocol(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "http/protobuf"},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, "http/protobuf"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "grpc"},
		// The specific variable is valid, so the general one is not looked at.
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "bogus"}, "http/protobuf"},
	} {
		c := Defaults()
		c.Protocol = "grpc"
		if tc.want == "grpc" {
			c.Protocol = "http/protobuf"
		}
		s, err := resolve(c, fakeEnv(tc.env))
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		if s.Protocol != tc.want {
			t.Errorf("%v: protocol %q, want %q", tc.env, s.Protocol, tc.want)
		}
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		for _, v := range []string{"http/json", "GRPC", "http"} {
			_, err := resolve(Defaults(), fakeEnv(map[string]string{k: v}))
			if err == nil {
				t.Errorf("%s=%s accepted", k, v)
				continue
			}
			if msg := err.Error(); !strings.Contains(msg, k) || !strings.Contains(msg, v) || !strings.Contains(msg, "http/protobuf") {
				t.Errorf("%s=%s: error %q should name the variable, the value and what is supported", k, v, msg)
			}
		}
	}
}

func TestResolveServiceName(t *testing.T) {
	s, err := resolve(Defaults(), fakeEnv(map[string]string{"OTEL_SERVICE_NAME": "checkout-proxy"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.ServiceName != "checkout-proxy" {
		t.Errorf("service name %q", s.ServiceName)
	}
}

// Every sampler name of the OpenTelemetry spec that kproxy supports maps
// to its ratio and parent rule; the ratio samplers read the argument.
func TestResolveSampler(t *testing.T) {
	for _, tc := range []struct {
		name, arg   string
		yaml        *float64
		ratio       float64
		parentBased bool
	}{
		{"", "", ratioPtr(0.3), 0.3, true}, // the file's ratio stays
		{"always_on", "", ratioPtr(0.3), 1, false},
		{"always_off", "", nil, 0, false},
		{"traceidratio", "0.25", nil, 0.25, false},
		{"traceidratio", "", ratioPtr(0.3), 1, false}, // spec: missing arg means 1
		{"traceidratio", "0", nil, 0, false},
		{"traceidratio", "1", nil, 1, false},
		{"parentbased_always_on", "", ratioPtr(0.3), 1, true},
		{"parentbased_always_off", "", nil, 0, true},
		{"parentbased_traceidratio", "0.125", nil, 0.125, true},
		{"parentbased_traceidratio", "", nil, 1, true},
		{"always_on", "0.5", nil, 1, false}, // arg ignored by non-ratio samplers
	} {
		c := Defaults()
		c.SampleRatio = tc.yaml
		s, err := resolve(c, fakeEnv(map[string]string{"OTEL_TRACES_SAMPLER": tc.name, "OTEL_TRACES_SAMPLER_ARG": tc.arg}))
		if err != nil {
			t.Errorf("%s(%s): %v", tc.name, tc.arg, err)
			continue
		}
		if s.ratio != tc.ratio || s.parentBased != tc.parentBased {
			t.Errorf("%s(%s): ratio %v parentBased %v, want %v %v", tc.name, tc.arg, s.ratio, s.parentBased, tc.ratio, tc.parentBased)
		}
	}
}

func TestResolveSamplerErrors(t *testing.T) {
	for _, tc := range []struct{ name, arg, mention string }{
		{"jaeger_remote", "", "OTEL_TRACES_SAMPLER"},
		{"xray", "", "OTEL_TRACES_SAMPLER"},
		{"AlwaysOn", "", "OTEL_TRACES_SAMPLER"},
		{"traceidratio", "half", "OTEL_TRACES_SAMPLER_ARG"},
		{"traceidratio", "1.5", "OTEL_TRACES_SAMPLER_ARG"},
		{"traceidratio", "-0.1", "OTEL_TRACES_SAMPLER_ARG"},
		{"parentbased_traceidratio", "NaN", "OTEL_TRACES_SAMPLER_ARG"},
		{"parentbased_traceidratio", "2", "OTEL_TRACES_SAMPLER_ARG"},
	} {
		_, err := resolve(Defaults(), fakeEnv(map[string]string{"OTEL_TRACES_SAMPLER": tc.name, "OTEL_TRACES_SAMPLER_ARG": tc.arg}))
		if err == nil {
			t.Errorf("%s(%s) accepted", tc.name, tc.arg)
		} else if !strings.Contains(err.Error(), tc.mention+"=") {
			t.Errorf("%s(%s): error %q does not name %s", tc.name, tc.arg, err, tc.mention)
		}
	}
}
