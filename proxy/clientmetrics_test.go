package proxy

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/otlptest"
	"github.com/kproxy/kproxy/telemetry"
)

// TestClientMetricsFromFranzGo: with telemetry.clients on, kproxy offers
// the KIP-714 APIs to a franz-go client in front of a broker that has
// none, answers them itself, and exports what the client pushes, labelled
// with its client id. The broker sees neither API.
func TestClientMetricsFromFranzGo(t *testing.T) {
	sink := otlptest.NewMetricsSink(t, nil)
	cfg := telemetry.Defaults().Clients
	cfg.Enabled, cfg.PushInterval, cfg.Metrics = true, time.Second, []string{""}
	clients, err := telemetry.NewClients(cfg, telemetry.Collector{Protocol: "http/protobuf", Endpoint: sink.URL},
		telemetry.NewClientsMetrics(prometheus.NewRegistry()), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { clients.Close(time.Second) })
	var reached atomic.Int32 // telemetry requests that reached kfake
	env := startKfakeWith(t, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "orders")},
		func(s *Server) { s.SetClients(clients) },
		func(c *kfake.Cluster) {
			for _, k := range []int16{framing.KeyGetTelemetrySubscriptions, framing.KeyPushTelemetry} {
				c.ControlKey(k, func(kmsg.Request) (kmsg.Response, error, bool) {
					reached.Add(1)
					return nil, nil, false
				})
			}
		})
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.ClientID("orders-svc"), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "franz-go's pushed metrics at the collector, with its client id", func() bool {
		for _, n := range sink.Names("client_id", "orders-svc") {
			if strings.HasPrefix(n, "org.apache.kafka.") {
				return true
			}
		}
		return false
	})
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d client telemetry requests reached the broker: kproxy must answer them all", n)
	}
	if got := env.requests("PushTelemetry"); got < 1 {
		t.Fatalf("PushTelemetry requests counted: %v", got)
	}
}
