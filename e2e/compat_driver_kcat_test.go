package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// kcat (librdkafka's command-line tool) runs through clients/kcat/driver.py,
// a standard-library Python wrapper; clients/kcat/install.sh installs
// Debian's kcat package.
func init() {
	registerDriver(20, "kcat", func(t *testing.T) kclients.Driver {
		dir := filepath.Join(harness.E2EDir(t), "clients", "kcat")
		python, err := exec.LookPath("python3")
		if err != nil {
			t.Fatal("python3 is not on PATH: the kcat driver needs it (Debian: apt-get install python3), then run `bash e2e/run.sh`")
		}
		if _, err := exec.LookPath("kcat"); err != nil {
			t.Fatal("kcat is not on PATH: run `bash e2e/run.sh` as root (its clients/kcat/install.sh runs `apt-get install -y kcat`), " +
				"or install it yourself: apt-get install -y kcat")
		}
		return processDriver(t, "kcat", []string{python, filepath.Join(dir, "driver.py")}, dir)
	})
}
