package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The closes by side exist at 0 before the first close, so that
// increase() in an alert counts that first close.
func TestCloseCountersStartAtZeroOnBothSides(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for name, v := range map[string]*prometheus.CounterVec{
		"kproxy_oversize_closes_total":        m.Oversize,
		"kproxy_unread_overflow_closes_total": m.Overflow,
		"kproxy_write_stall_closes_total":     m.WriteStalls,
		"kproxy_buffer_budget_closes_total":   m.OverBudget,
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 2 {
			t.Errorf("%s: %d series before any close (err %v), want 2 (client, upstream)", name, n, err)
		}
		for _, side := range []string{"client", "upstream"} {
			if got := testutil.ToFloat64(v.WithLabelValues(side)); got != 0 {
				t.Errorf("%s{side=%q} = %v, want 0", name, side, got)
			}
		}
	}
}
