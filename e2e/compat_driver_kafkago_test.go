package e2e

import (
	"testing"

	"github.com/kproxy/kproxy/e2e/kclients"
)

func init() {
	registerDriver(50, "kafka-go", func(t *testing.T) kclients.Driver {
		return kclients.KafkaGo{Version: moduleVersion(t, "github.com/segmentio/kafka-go")}
	})
}
