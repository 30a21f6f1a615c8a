package harness

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// goBinary is a binary `go build` makes once per test binary, for every
// test that needs it.
type goBinary struct {
	once sync.Once
	path string
	err  error
}

// get builds pkg in dir into the work folder as name, the first time it
// is asked, and returns its path; a failed build fails every test that
// asks.
func (b *goBinary) get(t testing.TB, name, dir, pkg string) string {
	t.Helper()
	work := mustWorkDir(t)
	b.once.Do(func() {
		path := filepath.Join(work, name)
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", path, pkg)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, out)
			return
		}
		t.Logf("built %s in %v", name, time.Since(start).Round(time.Millisecond))
		b.path = path
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}
