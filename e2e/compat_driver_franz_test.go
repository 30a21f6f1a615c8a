package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

func init() {
	registerDriver(30, "franz-go", func(t *testing.T) kclients.Driver {
		return kclients.Franz{Version: moduleVersion(t, "github.com/twmb/franz-go")}
	})
}

// moduleVersion is the version of a module this module requires, read
// from go.mod (test binaries carry no dependency list in their build info).
func moduleVersion(t *testing.T, path string) string {
	b, err := os.ReadFile(filepath.Join(harness.E2EDir(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	t.Fatalf("module %s is not required by e2e/go.mod", path)
	return ""
}
