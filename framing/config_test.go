package framing_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/fielderr"
)

// TestConfigValidate checks each field's bounds and that errors name the
// YAML field.
func TestConfigValidate(t *testing.T) {
	d := framing.Defaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cases := []struct {
		field string
		set   func(*framing.Config)
		ok    bool
	}{
		{"max_request_bytes", func(c *framing.Config) { c.MaxRequestBytes = 7 }, false},
		{"max_request_bytes", func(c *framing.Config) { c.MaxRequestBytes = 8 }, true},
		{"max_request_bytes", func(c *framing.Config) { c.MaxRequestBytes = 1 << 30 }, true},
		{"max_request_bytes", func(c *framing.Config) { c.MaxRequestBytes = 1<<30 + 1 }, false},
		{"max_response_bytes", func(c *framing.Config) { c.MaxResponseBytes = 0 }, false},
		{"max_response_bytes", func(c *framing.Config) { c.MaxResponseBytes = 1<<30 + 1 }, false},
		{"read_timeout", func(c *framing.Config) { c.ReadTimeout = 0 }, false},
		{"read_timeout", func(c *framing.Config) { c.ReadTimeout = -time.Second }, false},
		{"read_timeout", func(c *framing.Config) { c.ReadTimeout = time.Millisecond }, true},
	}
	for i, c := range cases {
		cfg := d
		c.set(&cfg)
		err := cfg.Validate()
		if c.ok != (err == nil) {
			t.Errorf("case %d (%s): %v", i, c.field, err)
		}
		var fe *fielderr.Error
		if err != nil && (!errors.As(err, &fe) || fe.Field != c.field) {
			t.Errorf("case %d: %v does not name %s", i, err, c.field)
		}
	}
}
