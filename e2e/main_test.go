package e2e

import (
	"os"
	"testing"

	"github.com/kproxy/kproxy/e2e/harness"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childProducerEnv); spec != "" {
		childProducer(spec) // never returns
	}
	harness.Main(m)
}
