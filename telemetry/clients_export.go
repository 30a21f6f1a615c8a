package telemetry

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// The export queue's bounds: pushes are small (KBs), but a slow
// collector must never make kproxy hold more than this; past either,
// pushes are dropped and counted.
const (
	exportQueueLen   = 256
	exportQueueBytes = 32 << 20
	exportTimeout    = 10 * time.Second
)

// clientsExporter sends pushed metrics to the collector from one
// goroutine, so a slow or absent collector costs clients nothing but
// their metrics. The client's OTLP is sent on as it came (gauges, sums,
// histograms, summaries, exemplars), with only the resource attributes
// added: the SDK's metric exporters take SDK data, and converting would
// lose what the SDK does not model.
type clientsExporter struct {
	send   func(ctx context.Context, req *colmetricspb.ExportMetricsServiceRequest) error
	closer func() error
	m      *ClientsMetrics
	queue  chan queued
	bytes  atomic.Int64 // inflated bytes queued
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

type queued struct {
	rms  []*metricspb.ResourceMetrics
	size int
}

func newClientsExporter(col Collector, m *ClientsMetrics) (*clientsExporter, error) {
	e := &clientsExporter{m: m, queue: make(chan queued, exportQueueLen), stop: make(chan struct{}), done: make(chan struct{})}
	var err error
	if col.Protocol == "http/protobuf" {
		e.send, e.closer = httpSender(col.Endpoint)
	} else if e.send, e.closer, err = grpcSender(col.Endpoint); err != nil {
		return nil, err
	}
	go e.run()
	return e, nil
}

// enqueue queues rms for export, or drops them when the queue is full.
func (e *clientsExporter) enqueue(rms []*metricspb.ResourceMetrics, size int) {
	if len(rms) == 0 {
		return
	}
	if e.bytes.Add(int64(size)) > exportQueueBytes {
		e.bytes.Add(-int64(size))
		e.m.dropped.WithLabelValues("queue_full").Inc()
		return
	}
	select {
	case e.queue <- queued{rms, size}:
	default:
		e.bytes.Add(-int64(size))
		e.m.dropped.WithLabelValues("queue_full").Inc()
	}
}

func (e *clientsExporter) run() {
	defer close(e.done)
	for {
		select {
		case q := <-e.queue:
			e.export(q)
		case <-e.stop:
			for { // what was queued before close
				select {
				case q := <-e.queue:
					e.export(q)
				default:
					return
				}
			}
		}
	}
}

func (e *clientsExporter) export(q queued) {
	e.bytes.Add(-int64(q.size))
	ctx, cancel := context.WithTimeout(context.Background(), exportTimeout)
	defer cancel()
	if err := e.send(ctx, &colmetricspb.ExportMetricsServiceRequest{ResourceMetrics: q.rms}); err != nil {
		e.m.dropped.WithLabelValues("export_failed").Inc()
		return
	}
	e.m.exported.Inc()
}

// close stops taking pushes and exports what is queued, for at most d.
func (e *clientsExporter) close(d time.Duration) {
	e.once.Do(func() {
		close(e.stop)
		select {
		case <-e.done:
		case <-time.After(d):
		}
		e.closer()
	})
}

// httpSender posts OTLP/HTTP protobuf to endpoint, a full URL.
func httpSender(endpoint string) (func(context.Context, *colmetricspb.ExportMetricsServiceRequest) error, func() error) {
	client := &http.Client{Timeout: exportTimeout}
	send := func(ctx context.Context, req *colmetricspb.ExportMetricsServiceRequest) error {
		body, err := proto.Marshal(req)
		if err != nil {
			return err
		}
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
		if err != nil {
			return err
		}
		hr.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := client.Do(hr)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("collector answered %s", resp.Status)
		}
		return nil
	}
	return send, func() error { client.CloseIdleConnections(); return nil }
}

// grpcSender calls the OTLP metrics service at endpoint: host:port or a
// URL; TLS (system roots) for https URLs, plaintext otherwise, as the
// OpenTelemetry exporters take an http:// endpoint.
func grpcSender(endpoint string) (func(context.Context, *colmetricspb.ExportMetricsServiceRequest) error, func() error, error) {
	target, creds := endpoint, insecure.NewCredentials()
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return nil, nil, fmt.Errorf("telemetry.clients: endpoint %q is not a URL or host:port", endpoint)
		}
		target = u.Host
		if u.Scheme == "https" {
			creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
		}
	}
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry.clients: endpoint %q: %w", endpoint, err)
	}
	client := colmetricspb.NewMetricsServiceClient(cc)
	send := func(ctx context.Context, req *colmetricspb.ExportMetricsServiceRequest) error {
		_, err := client.Export(ctx, req)
		return err
	}
	return send, cc.Close, nil
}
