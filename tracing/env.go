package tracing

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// settings is the configuration in force after the OTEL_* environment has
// been applied over the file.
type settings struct {
	Config
	ratio       float64
	parentBased bool
}

// resolve applies the standard environment over c. Endpoint, protocol and
// headers given only by the environment are left to the exporter, which
// reads them itself.
func resolve(c Config, getenv func(string) string) (settings, error) {
	s := settings{Config: c, ratio: 1, parentBased: true}
	if c.SampleRatio != nil {
		s.ratio = *c.SampleRatio
	}
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		s.Enabled = true
		s.Endpoint = "" // the exporter takes the environment's
	}
	switch v := getenv("OTEL_TRACES_EXPORTER"); v {
	case "", "otlp":
	case "none":
		s.Enabled = false
	default:
		return s, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: kproxy exports otlp (or none)", v)
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		s.Enabled = false
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(k); v != "" {
			if v != "grpc" && v != "http/protobuf" {
				return s, fmt.Errorf("%s=%q: kproxy supports grpc and http/protobuf", k, v)
			}
			s.Protocol = v
			break
		}
	}
	if v := getenv("OTEL_SERVICE_NAME"); v != "" {
		s.ServiceName = v
	}
	if err := s.samplerFromEnv(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return s, err
	}
	return s, nil
}

// samplerFromEnv understands the OpenTelemetry sampler names.
func (s *settings) samplerFromEnv(name, arg string) error {
	ratio := func() error {
		if arg == "" {
			s.ratio = 1
			return nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(r >= 0 && r <= 1) { // also refuses NaN
			return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio between 0 and 1", arg)
		}
		s.ratio = r
		return nil
	}
	switch name {
	case "":
		return nil
	case "always_on":
		s.ratio, s.parentBased = 1, false
	case "always_off":
		s.ratio, s.parentBased = 0, false
	case "traceidratio":
		s.parentBased = false
		return ratio()
	case "parentbased_always_on":
		s.ratio, s.parentBased = 1, true
	case "parentbased_always_off":
		s.ratio, s.parentBased = 0, true
	case "parentbased_traceidratio":
		s.parentBased = true
		return ratio()
	default:
		return fmt.Errorf("OTEL_TRACES_SAMPLER=%q is not supported", name)
	}
	return nil
}

var osGetenv = os.Getenv
