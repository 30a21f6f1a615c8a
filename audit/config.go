package audit

import (
	"fmt"
	"strings"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/fielderr"
)

// Stdout is the output value that writes lines to kproxy's standard
// output, for a log collector that reads the container's stream.
const Stdout = "stdout"

// Config is the `audit:` section of kproxy.yaml.
type Config struct {
	// Enabled turns the audit log on; off, Open returns a nil *Log and
	// every method is a no-op.
	Enabled bool `yaml:"enabled"`
	// Output is "stdout" or a file path. A file is rotated by size.
	Output string `yaml:"output"`
	// MaxFileBytes is the size at which a file output is rotated. The
	// rotation library counts whole MiB, so it is rounded up to one
	// (1 byte to 1048576 rounds to 1 MiB, 1048577 to 2 MiB).
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxFiles is how many rotated files are kept beside the current one;
	// older ones are deleted. There is no "keep all": an audit trail that
	// can fill the disk loses lines once it has.
	MaxFiles int `yaml:"max_files"`
	// APIs narrows the log to these Kafka API names; empty is every API
	// that changes cluster state. Each must be one of those.
	APIs []string `yaml:"apis"`
}

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config {
	return Config{
		Output:       Stdout,
		MaxFileBytes: 100 << 20,
		MaxFiles:     5,
	}
}

// Validate reports the first invalid field, with its path in the section.
func (c Config) Validate() error {
	file := c.Output != Stdout
	switch {
	case c.Output == "":
		return fielderr.New("output", `is required: "stdout" or a file path`)
	case file && strings.HasSuffix(c.Output, "/"):
		return fielderr.New("output", "must be a file, not a directory")
	case c.MaxFileBytes <= 0:
		return fielderr.New("max_file_bytes", "must be positive (it is rounded up to whole MiB)")
	case c.MaxFiles < 0:
		return fielderr.New("max_files", "must not be negative")
	case file && c.MaxFiles < 1:
		return fielderr.New("max_files", "must be at least 1 for a file output: there is no keep-all setting")
	}
	for i, name := range c.APIs {
		key, ok := framing.KeyForName(name)
		switch {
		case !ok:
			return fielderr.New(fmt.Sprintf("apis.%d", i), fmt.Sprintf("unknown Kafka API %q", name))
		case !ChangesCluster(key):
			return fielderr.New(fmt.Sprintf("apis.%d", i), fmt.Sprintf("%q does not change cluster state, so it is not audited (refusals of it are, whatever this list says)", name))
		}
	}
	return nil
}

// maxSizeMiB is max_file_bytes as the rotation library's MaxSize, which
// counts whole MiB: rounded up, so a file never rotates before the size
// asked for.
func (c Config) maxSizeMiB() int {
	return int((c.MaxFileBytes + (1<<20 - 1)) >> 20)
}
