package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/fielderr"
)

func TestDefaultsValidate(t *testing.T) {
	c := Defaults()
	if c.Enabled || c.Output != "stdout" || c.MaxFileBytes != 104857600 || c.MaxFiles != 5 || len(c.APIs) != 0 {
		t.Errorf("Defaults() = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestValidateFieldPaths(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
		msg   string
	}{
		{"no output", func(c *Config) { c.Output = "" }, "output", "required"},
		{"directory", func(c *Config) { c.Output = "/var/log/" }, "output", "directory"},
		{"zero size", func(c *Config) { c.MaxFileBytes = 0 }, "max_file_bytes", "positive"},
		{"negative files", func(c *Config) { c.MaxFiles = -1 }, "max_files", "negative"},
		{"file keeps none", func(c *Config) { c.Output, c.MaxFiles = "/tmp/a.log", 0 }, "max_files", "at least 1"},
		{"unknown api", func(c *Config) { c.APIs = []string{"DeleteTopics", "DeleteTopic"} }, "apis.1", `unknown Kafka API "DeleteTopic"`},
		{"api that changes nothing", func(c *Config) { c.APIs = []string{"Produce"} }, "apis.0", `"Produce" does not change cluster state`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.edit(&c)
			var fe *fielderr.Error
			if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("Validate() = %v, want %s: ...%s...", err, tc.field, tc.msg)
			}
		})
	}
	c := Defaults()
	c.MaxFiles = 0 // stdout rotates nothing
	c.APIs = []string{"CreateTopics", "AlterPartitionAssignments", "AlterUserScramCredentials", "DeleteAcls", "IncrementalAlterConfigs"}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}

// The rotation library counts whole MiB: max_file_bytes rounds up.
func TestMaxSizeRoundsUp(t *testing.T) {
	for bytes, mib := range map[int64]int{1: 1, 1 << 20: 1, 1<<20 + 1: 2, 104857600: 100, 104857601: 101} {
		if got := (Config{MaxFileBytes: bytes}).maxSizeMiB(); got != mib {
			t.Errorf("max_file_bytes %d: %d MiB, want %d", bytes, got, mib)
		}
	}
}

func TestOpenChecksOutput(t *testing.T) {
	c := Defaults()
	c.Enabled = true
	c.Output = ""
	if _, err := Open(c, nil, Env{}); err == nil {
		t.Error("Open of an invalid section worked")
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.Output = filepath.Join(blocker, "audit.log") // under a file: cannot be made
	if _, err := Open(c, nil, Env{}); err == nil {
		t.Error("Open of an output that cannot be created worked")
	}
	c.Output = filepath.Join(t.TempDir(), "sub", "audit.log")
	l, err := Open(c, nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
	c.Output = Stdout
	l, err = Open(c, nil, Env{})
	if err != nil || l == nil {
		t.Fatalf("Open(stdout) = %v, %v", l, err)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
}
