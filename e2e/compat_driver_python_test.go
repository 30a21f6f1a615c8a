package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// confluent-kafka for Python (librdkafka) runs clients/python/driver.py
// in the virtual environment clients/python/install.sh made in the cache.
func init() {
	registerDriver(60, "confluent-kafka-python", func(t *testing.T) kclients.Driver {
		dir := filepath.Join(harness.E2EDir(t), "clients", "python")
		cache := os.Getenv(harness.CacheEnv)
		python := filepath.Join(cache, "python-venv", "bin", "python")
		if cache == "" {
			t.Fatalf("%s is not set: run the suite with `bash e2e/run.sh`", harness.CacheEnv)
		}
		if _, err := os.Stat(python); err != nil {
			t.Fatalf("the confluent-kafka driver's venv is missing (%v): run `bash e2e/run.sh` "+
				"(or `bash e2e/clients/python/install.sh %s`; it needs python3 with venv)", err, cache)
		}
		return processDriver(t, "python", []string{python, filepath.Join(dir, "driver.py")}, dir)
	})
}
