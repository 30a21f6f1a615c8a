package tracing

import (
	"errors"
	"math"
	"testing"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// Validate names the wrong field, so the loader can point at the YAML line.
func TestConfigValidate(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"", func(c *Config) { c.Protocol = "http/protobuf" }},
		{"", func(c *Config) { c.SampleRatio = ratioPtr(0) }},
		{"", func(c *Config) { c.SampleRatio = ratioPtr(1) }},
		{"", func(c *Config) { c.MaxQueueSize = 1 }},
		{"", func(c *Config) { c.Links.Max = 0 }},
		{"", func(c *Config) { c.Links.Max = 1000 }},
		{"protocol", func(c *Config) { c.Protocol = "" }},
		{"protocol", func(c *Config) { c.Protocol = "http/json" }},
		{"sample_ratio", func(c *Config) { c.SampleRatio = ratioPtr(-0.01) }},
		{"sample_ratio", func(c *Config) { c.SampleRatio = ratioPtr(1.01) }},
		{"sample_ratio", func(c *Config) { c.SampleRatio = ratioPtr(math.NaN()) }},
		{"max_queue_size", func(c *Config) { c.MaxQueueSize = 0 }},
		{"max_queue_size", func(c *Config) { c.MaxQueueSize = -1 }},
		{"links.max", func(c *Config) { c.Links.Max = -1 }},
		{"links.max", func(c *Config) { c.Links.Max = 1001 }},
		{"", func(c *Config) { c.Links.MaxDecompressedBytes, c.Links.MaxDecompressedBatches = 1, 1 }},
		{"", func(c *Config) { c.Links.MaxDecompressedBytes = 1 << 30 }},
		{"links.max_decompressed_bytes", func(c *Config) { c.Links.MaxDecompressedBytes = 0 }},
		{"links.max_decompressed_bytes", func(c *Config) { c.Links.MaxDecompressedBytes = 1<<30 + 1 }},
		{"links.max_decompressed_batches", func(c *Config) { c.Links.MaxDecompressedBatches = -1 }},
		{"links.max_decompressed_bytes_per_second", func(c *Config) { c.Links.MaxDecompressedBytesPerSecond = -1 }},
		{"service_name", func(c *Config) { c.ServiceName = "" }},
	} {
		c := Defaults()
		tc.edit(&c)
		err := c.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%+v: %v", c, err)
			}
			continue
		}
		var fe *fielderr.Error
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%+v: error %v, want one for field %s", c, err, tc.field)
		}
	}
}
