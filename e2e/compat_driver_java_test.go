package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kproxy/kproxy/e2e/harness"
	"github.com/kproxy/kproxy/e2e/kclients"
)

// javaClientVersion is the Apache Kafka release whose Java client (and
// perf tools) the Java driver runs, whatever broker it talks to.
const javaClientVersion = "4.4.0"

func init() {
	registerDriver(10, "java", func(t *testing.T) kclients.Driver {
		libs := harness.KafkaLibs(t, javaClientVersion)
		classes := filepath.Join(os.Getenv(harness.CacheEnv), "java-driver", "classes")
		if _, err := os.Stat(filepath.Join(classes, "KafkaDriver.class")); err != nil {
			t.Fatalf("the Java client driver is not compiled in %s: run `bash e2e/run.sh` "+
				"(or `bash e2e/clients/java/install.sh %s`): %v", classes, os.Getenv(harness.CacheEnv), err)
		}
		argv := []string{harness.Java(t),
			"-cp", classes + string(os.PathListSeparator) + filepath.Join(libs, "*"),
			"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
			"-Djava.security.egd=file:/dev/urandom",
			"KafkaDriver"}
		return processDriver(t, "java", argv, "")
	})
}
