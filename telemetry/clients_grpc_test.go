package telemetry

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
)

// grpcSink is an OTLP/gRPC metrics service that hands on what it gets.
type grpcSink struct {
	colmetricspb.UnimplementedMetricsServiceServer
	got chan *colmetricspb.ExportMetricsServiceRequest
}

func (s *grpcSink) Export(_ context.Context, r *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	s.got <- r
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

// TestPushExportedOverGRPC: with protocol grpc, pushes reach an OTLP
// gRPC metrics service.
func TestPushExportedOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &grpcSink{got: make(chan *colmetricspb.ExportMetricsServiceRequest, 4)}
	srv := grpc.NewServer()
	colmetricspb.RegisterMetricsServiceServer(srv, sink)
	go srv.Serve(ln)
	defer srv.Stop()
	cfg := clientsDefaults()
	cfg.Enabled = true
	c, err := NewClients(cfg, Collector{Protocol: "grpc", Endpoint: ln.Addr().String()}, NewClientsMetrics(prometheus.NewRegistry()), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(time.Second)
	sub := subscribe(t, c)
	if r := c.Push(pushReq(sub, 0, metricsData(t, "org.apache.kafka.producer.node.request.latency.avg")), ClientMeta{ClientID: "g"}); r.ErrorCode != 0 {
		t.Fatalf("push: error %d", r.ErrorCode)
	}
	select {
	case r := <-sink.got:
		if attr(r.ResourceMetrics[0].Resource.Attributes, "client_id") != "g" {
			t.Fatalf("exported resource %v lacks client_id g", r.ResourceMetrics[0].Resource)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reached the gRPC collector in 10 s")
	}
}
