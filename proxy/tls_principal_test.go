package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/tracing"
)

// Rules match the identity a client proved with its certificate: only
// workloads of the payments namespace may produce to payments topics,
// and the identity is on every span of the connection.
func TestTLSPrincipalRules(t *testing.T) {
	tr, spans := newTestTracer(t, nil)
	sides := tlsSides{client: true, mutual: true}
	w := startTracedTLSKfake(t, sides, []kfake.Opt{kfake.SeedTopics(1, "payments-ledger", "public")}, nil, tr)
	applyPolicies(t, w.testEnv, policy.Rule{Name: "payments-only", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"Produce"}, Topics: []string{"payments-*"},
			ExceptPrincipals: []string{"spiffe://cluster.local/ns/payments/*"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(id, topic string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(w.addr), kgo.DialTLSConfig(w.clientTLS(t, sides, "app", id)))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(id)}).FirstErr()
	}
	const payments, orders = "spiffe://cluster.local/ns/payments/sa/api", "spiffe://cluster.local/ns/orders/sa/api"
	if err := produce(payments, "payments-ledger"); err != nil {
		t.Fatalf("payments workload refused: %v", err)
	}
	if err := produce(orders, "payments-ledger"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("orders workload producing to payments: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := produce(orders, "public"); err != nil {
		t.Fatalf("orders workload refused on a public topic: %v", err)
	}
	if !w.logs.contains(`"principal":"` + payments + `"`) {
		t.Error("the connection's principal is not in its log lines")
	}
	seen := map[string]bool{} // spans() waits for every span to end, then shuts the tracer down
	for _, s := range spans() {
		for _, a := range s.Attributes {
			if a.Key == tracing.PrincipalKey {
				seen[a.Value.AsString()] = true
			}
		}
	}
	if !seen[payments] || !seen[orders] {
		t.Fatalf("spans carry principals %v, want both clients'", seen)
	}
}
