package relay

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/telemetry"
)

// withClients turns telemetry.clients on for s, exporting nowhere that
// answers (nothing here is exported).
func withClients(t *testing.T, s *Session) {
	t.Helper()
	cfg := telemetry.Defaults().Clients
	cfg.Enabled = true
	c, err := telemetry.NewClients(cfg, telemetry.Collector{Protocol: "http/protobuf", Endpoint: "http://127.0.0.1:1/v1/metrics"},
		telemetry.NewClientsMetrics(prometheus.NewRegistry()), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(0) })
	s.env.Clients = c
}

// With telemetry.clients on, both KIP-714 requests are answered by the
// session in order with what came before them, nothing reaches the
// broker, and a PushTelemetry is never relayed inline (it inflates).
func TestClientTelemetryAnsweredInPlace(t *testing.T) {
	s, l := newSession(t, 8)
	push := kmsg.NewPtrPushTelemetryRequest()
	if !s.RequestsInline(frames(push)) {
		t.Fatal("with telemetry.clients off a PushTelemetry is a frame like any other: it should go inline")
	}
	withClients(t, s)
	if s.RequestsInline(frames(kmsg.NewPtrMetadataRequest(), push)) {
		t.Fatal("a PushTelemetry kproxy answers went inline: it is inflated, never on the poller")
	}
	var up Batch
	if err := s.Request(request(kmsg.NewPtrMetadataRequest(), 1), &up, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Request(request(kmsg.NewPtrGetTelemetrySubscriptionsRequest(), 2), &up, true); err != nil {
		t.Fatal(err)
	}
	if len(up) != 1 || int16(binary.BigEndian.Uint16(up[0][4:])) != framing.KeyMetadata {
		t.Fatalf("%d frames for the broker, want the Metadata only", len(up))
	}
	if len(l.out) != 0 {
		t.Fatal("the subscription was written before the Metadata answer ahead of it")
	}
	meta := kmsg.NewPtrMetadataResponse()
	if err := s.Response(brokerAnswer(up[0], meta), &l.out); err != nil {
		t.Fatal(err)
	}
	if len(l.out) != 2 {
		t.Fatalf("%d responses written, want the Metadata answer then kproxy's subscription", len(l.out))
	}
	resp := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
	if framing.ResponseCorrelationID(l.out[1]) != 2 {
		t.Fatalf("subscription answer has correlation id %d, want the client's 2", framing.ResponseCorrelationID(l.out[1]))
	}
	if err := resp.ReadFrom(l.out[1][4+4+1:]); err != nil { // size, correlation id, empty header tags
		t.Fatal(err)
	}
	if resp.ClientInstanceID == [16]byte{} || resp.PushIntervalMillis != int32((30*time.Second).Milliseconds()) {
		t.Fatalf("subscription %+v: want an assigned instance id and the configured interval", resp)
	}
}
