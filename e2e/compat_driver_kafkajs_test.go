package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// kafkajs (Node.js) runs clients/node/driver.js with the packages that
// clients/node/install.sh put in clients/node/node_modules.
func init() {
	registerDriver(70, "kafkajs", func(t *testing.T) kclients.Driver {
		dir := filepath.Join(harness.E2EDir(t), "clients", "node")
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatal("node is not on PATH: install Node.js 20+ (Debian: apt-get install nodejs npm), then run `bash e2e/run.sh`")
		}
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); err != nil {
			t.Fatalf("kafkajs is not installed in %s/node_modules: run `bash e2e/run.sh` "+
				"(or `bash e2e/clients/node/install.sh`, which runs npm ci there)", dir)
		}
		return processDriver(t, "kafkajs", []string{node, filepath.Join(dir, "driver.js")}, dir)
	})
}
