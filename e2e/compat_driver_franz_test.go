package e2e

import (
	"testing"

	"github.com/kproxy/kproxy/e2e/kclients"
)

func init() {
	registerDriver(30, "franz-go", func(t *testing.T) kclients.Driver {
		return kclients.Franz{Version: moduleVersion(t, "github.com/twmb/franz-go")}
	})
}
