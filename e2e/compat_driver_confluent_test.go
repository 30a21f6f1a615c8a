package e2e

import (
	"testing"

	"github.com/kproxy/kproxy/e2e/kclients"
)

func init() {
	registerDriver(25, "confluent-kafka-go", func(t *testing.T) kclients.Driver {
		return kclients.Confluent{Version: moduleVersion(t, "github.com/confluentinc/confluent-kafka-go/v2")}
	})
}
