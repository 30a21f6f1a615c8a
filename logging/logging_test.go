package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// TestValidate checks the documented levels and formats pass and that
// anything else is reported against the right field.
func TestValidate(t *testing.T) {
	for _, level := range []string{"trace", "debug", "info", "warn", "error"} {
		for _, format := range []string{"json", "console"} {
			if err := (Config{Level: level, Format: format}).Validate(); err != nil {
				t.Errorf("Validate(%s, %s) = %v", level, format, err)
			}
		}
	}
	if err := Defaults().Validate(); err != nil {
		t.Errorf("Defaults().Validate() = %v", err)
	}
	bad := []struct {
		c     Config
		field string
	}{
		{Config{Level: "bogus", Format: "json"}, "level"},
		{Config{Level: "", Format: "json"}, "level"},
		{Config{Level: "verbose", Format: "json"}, "level"},
		{Config{Level: "info", Format: "text"}, "format"},
		{Config{Level: "info", Format: ""}, "format"},
		{Config{Level: "info", Format: "JSON"}, "format"},
	}
	for _, b := range bad {
		var fe *fielderr.Error
		if err := b.c.Validate(); !errors.As(err, &fe) || fe.Field != b.field {
			t.Errorf("Validate(%+v) = %v, want a %s error", b.c, err, b.field)
		}
	}
}

// TestNewJSON checks json format writes one JSON object per line with the
// level, a timestamp and the message, and that the level filters.
func TestNewJSON(t *testing.T) {
	var buf bytes.Buffer
	log := New(Config{Level: "info", Format: "json"}, &buf)
	log.Debug().Msg("hidden")
	log.Info().Str("listen", "127.0.0.1:9092").Msg("kproxy started")
	log.Warn().Msg("careful")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2 (debug filtered):\n%s", len(lines), buf.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("line is not JSON: %v: %s", err, lines[0])
	}
	for k, want := range map[string]any{"level": "info", "message": "kproxy started", "listen": "127.0.0.1:9092"} {
		if first[k] != want {
			t.Errorf("%s = %v, want %v", k, first[k], want)
		}
	}
	if _, ok := first["time"]; !ok {
		t.Errorf("no time field: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"level":"warn"`) {
		t.Errorf("second line lacks warn level: %s", lines[1])
	}
}

// TestNewConsole checks console format is human text, not JSON.
func TestNewConsole(t *testing.T) {
	var buf bytes.Buffer
	log := New(Config{Level: "debug", Format: "console"}, &buf)
	log.Info().Str("listen", "127.0.0.1:9092").Msg("kproxy started")
	out := buf.String()
	if strings.HasPrefix(out, "{") {
		t.Fatalf("console output looks like JSON: %s", out)
	}
	for _, want := range []string{"INF", "kproxy started", "listen=", "127.0.0.1:9092"} {
		if !strings.Contains(out, want) {
			t.Errorf("console output %q lacks %q", out, want)
		}
	}
}
