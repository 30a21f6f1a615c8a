package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/proxy/core"
)

// Metrics are the Prometheus collectors of the connections (opened,
// refused, buffered, batched, closed), with the sessions' own
// (relay.Metrics); the connection core owns them.
type Metrics = core.Metrics

// NewMetrics registers the relay's collectors with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics { return core.NewMetrics(reg) }
