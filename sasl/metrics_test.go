package sasl

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestMetrics(t *testing.T) *Metrics {
	t.Helper()
	return NewMetrics(prometheus.NewRegistry())
}

func counted(t *testing.T, m *Metrics, kind, result string) float64 {
	t.Helper()
	return testutil.ToFloat64(m.auths.WithLabelValues(kind, result))
}
