package e2e

import (
	"testing"

	"github.com/kproxy/kproxy/e2e/kclients"
)

func init() {
	registerDriver(40, "sarama", func(t *testing.T) kclients.Driver {
		return kclients.Sarama{Version: moduleVersion(t, "github.com/IBM/sarama")}
	})
}
