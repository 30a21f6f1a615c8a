package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// What the driver registrations (compat_driver_*_test.go) share.

// processDriver starts the driver program argv (run in dir) of the matrix
// row id and asks it for its features; its record files go to a folder
// that lives as long as the test binary.
func processDriver(t *testing.T, id string, argv []string, dir string) kclients.Driver {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tmp := harness.WorkDir(t, id)
	if dir == "" {
		dir = tmp
	}
	d, err := kclients.NewProcess(ctx, argv, dir, harness.Env(), tmp)
	if err != nil {
		t.Fatalf("%s driver: %v", id, err)
	}
	return d
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
