package config

import (
	"errors"
	"strings"
	"testing"
)

// TestParseRejects checks that typos and wrong types fail at parse time,
// with the line of the offending key, instead of being silently ignored.
func TestParseRejects(t *testing.T) {
	cases := []struct {
		name, yaml string
		line       int
		mention    string
	}{
		{"unknown field", "proxy:\n  upstream: b:9092\n  listn: x\n", 3, "listn"},
		{"unknown section", "log:\n  level: info\nprox:\n  listen: x\n", 3, "prox"},
		{"string for int", "correlate:\n  max_in_flight: lots\n", 2, "lots"},
		{"bad duration", "framing:\n  max_request_bytes: 1024\n  read_timeout: soon\n", 3, "soon"},
		{"duration without unit", "proxy:\n  dial_timeout: 5\n", 2, "time.Duration"},
		{"string for bool", "admin:\n  pprof: maybe\n", 2, "maybe"},
		{"list for section", "proxy:\n  - listen\n", 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Parse([]byte(c.yaml))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse = %v (%T), want *Error", err, err)
			}
			if ce.Line != c.line {
				t.Errorf("Line = %d, want %d (%v)", ce.Line, c.line, err)
			}
			if !strings.Contains(ce.Msg, c.mention) {
				t.Errorf("Msg %q does not mention %q", ce.Msg, c.mention)
			}
		})
	}
}

// TestParseSyntax checks that broken YAML is an *Error too.
func TestParseSyntax(t *testing.T) {
	_, _, err := Parse([]byte("proxy:\n  listen: [\n"))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse = %v (%T), want *Error", err, err)
	}
}

// TestLoadNamesFile checks that Load puts the path into parse errors, so
// the message says which file to open.
func TestLoadNamesFile(t *testing.T) {
	path := writeFile(t, "proxy:\n  upstream: b:9092\n  listn: x\n")
	_, _, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":3: ") {
		t.Errorf("Load = %v, want prefix %q", err, path+":3: ")
	}
}

// TestLoadMissingFile checks a missing file is an error, not defaults.
func TestLoadMissingFile(t *testing.T) {
	if _, _, err := Load(t.TempDir() + "/nope.yaml"); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}
