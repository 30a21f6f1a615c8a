package policy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// headerOnlyRules are rules a sidecar typically runs on every request,
// none of which needs the body: the Produce request benchmarked below
// matches the rate rule only, which has a rate too high to ever fire.
func headerOnlyRules() []Rule {
	return []Rule{
		deny("block-legacy", Selector{ClientID: "legacy-app"}),
		deny("no-acl-changes", Selector{APIs: []string{"CreateAcls", "DeleteAcls"}}),
		deny("web-no-produce", Selector{ClientID: "web-*", APIs: []string{"Produce", "InitProducerId"}}),
		{Name: "batch-slow", Action: ActionThrottle, Match: Selector{ClientID: "batch-?"}, Limits: Limits{BytesPerSecond: 1 << 20}},
		{Name: "app-rate", Action: ActionThrottle, Match: Selector{ClientID: "app-*", APIs: []string{"Produce", "Fetch"}},
			Limits: Limits{RequestsPerSecond: 1e12, BytesPerSecond: 1e15, Key: "client_id"}},
	}
}

// BenchmarkCheckHeaderOnly is the per-request cost of policies that look
// at headers only. Target: under 200 ns and no allocation.
func BenchmarkCheckHeaderOnly(b *testing.B) {
	c := Config{Rules: headerOnlyRules()}
	if err := c.Validate(); err != nil {
		b.Fatal(err)
	}
	e := New(c, NewMetrics(prometheus.NewRegistry()))
	call := request(b, produce("orders"), "app-1")
	if v := call.check(e, t0); v.Outcome != Pass {
		b.Fatalf("verdict %+v, want Pass", v)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if v := e.Check(call.r, call.body, t0); v.Outcome != Pass {
			b.Fatal(v)
		}
	}
	if call.body.Decoded() {
		b.Fatal("a header-only check decoded the body")
	}
}
