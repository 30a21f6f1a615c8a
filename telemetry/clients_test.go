package telemetry

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kproxy/kproxy/internal/otlptest"
	"github.com/kproxy/kproxy/records"
)

func testClients(t *testing.T, endpoint string, mutate func(*ClientsConfig)) (*Clients, *ClientsMetrics, *clock) {
	t.Helper()
	cfg := clientsDefaults()
	cfg.Enabled = true
	cfg.PushInterval = 10 * time.Second
	cfg.MaxBytes = 64 << 10
	if mutate != nil {
		mutate(&cfg)
	}
	m := NewClientsMetrics(prometheus.NewRegistry())
	env := map[string]string{"POD_NAME": "app-0", "POD_NAMESPACE": "shop", "NODE_NAME": "node-a"}
	c, err := NewClients(cfg, Collector{Protocol: "http/protobuf", Endpoint: endpoint}, m, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(time.Second) })
	ck := &clock{t: time.Unix(1_700_000_000, 0)}
	c.now = ck.now
	return c, m, ck
}

// metricsData is one gauge, encoded as clients push it.
func metricsData(t *testing.T, name string) []byte {
	t.Helper()
	md := &metricspb.MetricsData{ResourceMetrics: []*metricspb.ResourceMetrics{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("client_rack", "zone-a")}},
		ScopeMetrics: []*metricspb.ScopeMetrics{{Metrics: []*metricspb.Metric{{
			Name: name,
			Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{{
				TimeUnixNano: 1, Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: 4.5}}}}},
		}}}},
	}}}
	b, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func subscribe(t *testing.T, c *Clients) *kmsg.GetTelemetrySubscriptionsResponse {
	t.Helper()
	return c.Subscriptions(kmsg.NewPtrGetTelemetrySubscriptionsRequest())
}

func pushReq(sub *kmsg.GetTelemetrySubscriptionsResponse, codec int8, payload []byte) *kmsg.PushTelemetryRequest {
	r := kmsg.NewPtrPushTelemetryRequest()
	r.ClientInstanceID, r.SubscriptionID, r.CompressionType, r.Metrics = sub.ClientInstanceID, sub.SubscriptionID, codec, payload
	return r
}

func attr(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// TestSubscriptionsAssignInstanceIDs: the zero UUID gets a new instance
// id, a known one is kept, and the subscription is the configuration's.
func TestSubscriptionsAssignInstanceIDs(t *testing.T) {
	sink := otlptest.NewMetricsSink(t, nil)
	c, _, _ := testClients(t, sink.URL, func(cfg *ClientsConfig) { cfg.Metrics = []string{"org.apache.kafka.producer."} })
	a, b := subscribe(t, c), subscribe(t, c)
	if a.ClientInstanceID == [16]byte{} || a.ClientInstanceID == b.ClientInstanceID {
		t.Fatalf("instance ids %x and %x: want two distinct, non-zero ids", a.ClientInstanceID, b.ClientInstanceID)
	}
	req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
	req.ClientInstanceID = a.ClientInstanceID
	if got := c.Subscriptions(req); got.ClientInstanceID != a.ClientInstanceID {
		t.Fatalf("a known instance id was replaced: %x, want %x", got.ClientInstanceID, a.ClientInstanceID)
	}
	if a.ErrorCode != 0 || a.PushIntervalMillis != 10_000 || a.TelemetryMaxBytes != 64<<10 || a.DeltaTemporality ||
		len(a.RequestedMetrics) != 1 || a.RequestedMetrics[0] != "org.apache.kafka.producer." || len(a.AcceptedCompressionTypes) != 5 {
		t.Fatalf("subscription %+v does not match the configuration", a)
	}
	other, _, _ := testClients(t, sink.URL, nil)
	if subscribe(t, other).SubscriptionID == a.SubscriptionID {
		t.Fatal("two different subscriptions share an id: a client would not be told its subscription changed")
	}
}

// TestPushEveryCodecExported: a push in each codec kproxy accepts is
// inflated, decoded and exported with kproxy's resource attributes next
// to the client's own.
func TestPushEveryCodecExported(t *testing.T) {
	sink := otlptest.NewMetricsSink(t, nil)
	c, m, ck := testClients(t, sink.URL, nil)
	sub := subscribe(t, c)
	for _, codec := range sub.AcceptedCompressionTypes {
		raw := metricsData(t, "org.apache.kafka.producer.record.queue.time.avg")
		payload := raw
		if codec != 0 {
			var err error
			if payload, err = records.Deflate(nil, int(codec), raw, false); err != nil {
				t.Fatal(err)
			}
		}
		ck.t = ck.t.Add(10 * time.Second)
		resp := c.Push(pushReq(sub, codec, payload), ClientMeta{ClientID: "orders-svc", Principal: "spiffe://cluster.local/ns/shop/sa/orders", Address: "10.0.0.7:51234"})
		if resp.ErrorCode != 0 {
			t.Fatalf("codec %d: error %v", codec, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(sink.Requests()) < len(sub.AcceptedCompressionTypes) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	got := sink.Requests()
	if len(got) != len(sub.AcceptedCompressionTypes) {
		t.Fatalf("collector got %d exports, want %d", len(got), len(sub.AcceptedCompressionTypes))
	}
	res := got[0].ResourceMetrics[0].Resource.Attributes
	for k, want := range map[string]string{"client_id": "orders-svc", "service.name": "orders-svc", "client_rack": "zone-a",
		"principal": "spiffe://cluster.local/ns/shop/sa/orders", "client_source_address": "10.0.0.7:51234",
		"k8s.pod.name": "app-0", "k8s.namespace.name": "shop", "k8s.node.name": "node-a"} {
		if v := attr(res, k); v != want {
			t.Errorf("resource %s = %q, want %q", k, v, want)
		}
	}
	if id := attr(res, "client_instance_id"); id == "" || id != attr(res, "service.instance.id") {
		t.Errorf("client_instance_id %q, service.instance.id %q: want the instance id in both", id, attr(res, "service.instance.id"))
	}
	if n := got[0].ResourceMetrics[0].ScopeMetrics[0].Metrics[0].Name; n != "org.apache.kafka.producer.record.queue.time.avg" {
		t.Errorf("metric %q was not passed on as pushed", n)
	}
	if v := testutil.ToFloat64(m.pushes.WithLabelValues("ok")); v != 5 {
		t.Errorf("pushes{result=ok} = %v, want 5", v)
	}
}

// TestPushRefusals: each bad push gets the code a broker gives it, and
// nothing of it is exported.
func TestPushRefusals(t *testing.T) {
	sink := otlptest.NewMetricsSink(t, nil)
	c, m, ck := testClients(t, sink.URL, func(cfg *ClientsConfig) { cfg.MaxBytes = 4096 })
	sub := subscribe(t, c)
	good := metricsData(t, "org.apache.kafka.consumer.poll.idle.ratio.avg")
	bomb, _ := records.Deflate(nil, 1, bytes.Repeat([]byte{0}, 1<<20), false) // 1 MiB of zeros, ~1 KiB gzipped
	garbage, _ := records.Deflate(nil, 4, []byte("not a protobuf \xff\xff\xff\xff"), false)
	cases := []struct {
		name   string
		mutate func(*kmsg.PushTelemetryRequest)
		want   *kerr.Error
		result string
	}{
		{"zero instance id", func(r *kmsg.PushTelemetryRequest) { r.ClientInstanceID = [16]byte{} }, kerr.InvalidRequest, "invalid_request"},
		{"stale subscription", func(r *kmsg.PushTelemetryRequest) { r.SubscriptionID++ }, kerr.UnknownSubscriptionID, "unknown_subscription"},
		{"unknown codec", func(r *kmsg.PushTelemetryRequest) { r.CompressionType = 9 }, kerr.UnsupportedCompressionType, "unsupported_compression"},
		{"over max_bytes", func(r *kmsg.PushTelemetryRequest) { r.Metrics = make([]byte, 4097) }, kerr.TelemetryTooLarge, "too_large"},
		{"inflates past max_bytes", func(r *kmsg.PushTelemetryRequest) { r.CompressionType, r.Metrics = 1, bomb }, kerr.TelemetryTooLarge, "too_large"},
		{"corrupt gzip", func(r *kmsg.PushTelemetryRequest) { r.CompressionType, r.Metrics = 1, []byte("\x1f\x8bnot gzip") }, kerr.InvalidRecord, "invalid_record"},
		{"not OTLP", func(r *kmsg.PushTelemetryRequest) { r.CompressionType, r.Metrics = 4, garbage }, kerr.InvalidRecord, "invalid_record"},
	}
	for _, tc := range cases {
		ck.t = ck.t.Add(time.Minute)
		r := pushReq(sub, 0, good)
		tc.mutate(r)
		if got := c.Push(r, ClientMeta{ClientID: "c"}); got.ErrorCode != tc.want.Code {
			t.Errorf("%s: error %v, want %v", tc.name, kerr.ErrorForCode(got.ErrorCode), tc.want)
		}
		if v := testutil.ToFloat64(m.pushes.WithLabelValues(tc.result)); v < 1 {
			t.Errorf("%s: pushes{result=%s} not counted", tc.name, tc.result)
		}
	}
	if len(bomb) > 4096 {
		t.Fatalf("the bomb is %d bytes compressed: it must pass the compressed bound to test the inflated one", len(bomb))
	}
	c.Close(5 * time.Second)
	if n := len(sink.Requests()); n != 0 {
		t.Fatalf("%d refused pushes were exported", n)
	}
}

// TestPushTooSoonThrottled: a second push inside half the interval is
// throttled, one after it is taken, and a terminating push always is.
func TestPushTooSoonThrottled(t *testing.T) {
	sink := otlptest.NewMetricsSink(t, nil)
	c, _, ck := testClients(t, sink.URL, nil)
	sub := subscribe(t, c)
	good := metricsData(t, "m")
	if r := c.Push(pushReq(sub, 0, good), ClientMeta{}); r.ErrorCode != 0 {
		t.Fatalf("first push: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	ck.t = ck.t.Add(time.Second)
	if r := c.Push(pushReq(sub, 0, good), ClientMeta{}); r.ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("push 1 s after the last, interval 10 s: %v, want THROTTLING_QUOTA_EXCEEDED", kerr.ErrorForCode(r.ErrorCode))
	}
	term := pushReq(sub, 0, good)
	term.Terminating = true
	if r := c.Push(term, ClientMeta{}); r.ErrorCode != 0 {
		t.Fatalf("terminating push: %v, want taken", kerr.ErrorForCode(r.ErrorCode))
	}
	ck.t = ck.t.Add(6 * time.Second)
	if r := c.Push(pushReq(sub, 0, good), ClientMeta{}); r.ErrorCode != 0 {
		t.Fatalf("push past half the interval: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// TestSlowCollectorDropsAndCounts: a collector that does not answer never
// holds a push; past the queue's bound, pushes are dropped and counted.
func TestSlowCollectorDropsAndCounts(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	sink := otlptest.NewMetricsSink(t, block)
	c, m, ck := testClients(t, sink.URL, nil)
	sub := subscribe(t, c)
	good := metricsData(t, "m")
	start := time.Now()
	for i := 0; i < exportQueueLen+50; i++ {
		r := pushReq(sub, 0, good)
		r.ClientInstanceID[0] = byte(i) // a distinct instance each: none throttled
		r.ClientInstanceID[1] = byte(i >> 8)
		r.ClientInstanceID[15] = 1
		if resp := c.Push(r, ClientMeta{}); resp.ErrorCode != 0 {
			t.Fatalf("push %d: %v", i, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	ck.t = ck.t.Add(time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("pushes took %v against a collector that does not answer: they waited for it", d)
	}
	if v := testutil.ToFloat64(m.dropped.WithLabelValues("queue_full")); v < 40 {
		t.Fatalf("dropped{reason=queue_full} = %v, want at least 40 of %d pushes past a %d queue", v, exportQueueLen+50, exportQueueLen)
	}
}

// TestCollectorResolution: the environment wins over the file, and the
// tracing collector fills what both leave empty, with the metrics path.
func TestCollectorResolution(t *testing.T) {
	cases := []struct {
		name       string
		cfg        ClientsConfig
		trEndpoint string
		trProtocol string
		env        map[string]string
		want       Collector
	}{
		{"tracing's http base", ClientsConfig{}, "http://otel:4318", "http/protobuf", nil, Collector{"http/protobuf", "http://otel:4318/v1/metrics"}},
		{"tracing's traces URL", ClientsConfig{}, "http://otel:4318/v1/traces", "http/protobuf", nil, Collector{"http/protobuf", "http://otel:4318/v1/metrics"}},
		{"tracing's grpc", ClientsConfig{}, "http://otel:4317", "", nil, Collector{"grpc", "http://otel:4317"}},
		{"own endpoint as is", ClientsConfig{Endpoint: "http://prom:9090/api/v1/otlp/v1/metrics", Protocol: "http/protobuf"}, "http://otel:4317", "grpc", nil,
			Collector{"http/protobuf", "http://prom:9090/api/v1/otlp/v1/metrics"}},
		{"env metrics endpoint wins", ClientsConfig{Endpoint: "http://a:1/v1/metrics", Protocol: "http/protobuf"}, "", "",
			map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://b:2/custom"}, Collector{"http/protobuf", "http://b:2/custom"}},
		{"env metrics protocol wins", ClientsConfig{Protocol: "grpc"}, "", "",
			map[string]string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, Collector{"http/protobuf", "http://c:4318/v1/metrics"}},
		{"defaults", ClientsConfig{}, "", "", nil, Collector{"grpc", "localhost:4317"}},
	}
	for _, tc := range cases {
		got, err := tc.cfg.Collector(tc.trEndpoint, tc.trProtocol, func(k string) string { return tc.env[k] })
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	if _, err := (ClientsConfig{Protocol: "http/protobuf", Endpoint: "otel:4318"}).Collector("", "", func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "http(s) URL") {
		t.Errorf("a host:port for http/protobuf: %v, want a clear error", err)
	}
}

// TestClientsConfigValidate: out-of-bounds fields are named.
func TestClientsConfigValidate(t *testing.T) {
	for field, mutate := range map[string]func(*ClientsConfig){
		"clients.push_interval": func(c *ClientsConfig) { c.PushInterval = time.Millisecond },
		"clients.max_bytes":     func(c *ClientsConfig) { c.MaxBytes = 0 },
		"clients.protocol":      func(c *ClientsConfig) { c.Protocol = "thrift" },
		"clients.metrics":       func(c *ClientsConfig) { c.Metrics = []string{"", "org."} },
		"clients.endpoint":      func(c *ClientsConfig) { c.Protocol, c.Endpoint = "http/protobuf", "otel:4318" },
	} {
		cfg := Defaults()
		mutate(&cfg.Clients)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming it", field, err)
		}
	}
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}
