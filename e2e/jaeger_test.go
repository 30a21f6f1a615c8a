package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/e2e/harness"
)

const (
	topic     = "orders"
	nRecords  = 5
	spanWait  = 30 * time.Second
	apiKeyFet = "1"
	apiKeyPro = "0"
	apiKeyJG  = "11"
)

// TestSpansReachJaeger runs kproxy (demo mode: kproxy in front of its
// embedded broker) exporting to a real Jaeger v2, produces traced records
// and consumes them through kproxy with franz-go, then checks that Jaeger
// holds kproxy's spans for it: Produce linked to the producer's trace,
// Fetch, JoinGroup and OffsetCommit, with the messaging attributes. Once
// over OTLP/gRPC and once over OTLP/HTTP.
func TestSpansReachJaeger(t *testing.T) {
	for _, tc := range []struct{ name, protocol string }{
		{"grpc", "grpc"},
		{"http", "http/protobuf"},
	} {
		t.Run(tc.name, func(t *testing.T) { testSpansReachJaeger(t, tc.name, tc.protocol) })
	}
}

func testSpansReachJaeger(t *testing.T, name, protocol string) {
	j := harness.StartJaeger(t)
	endpoint := "http://" + j.OTLPGRPC
	if protocol == "http/protobuf" {
		endpoint = "http://" + j.OTLPHTTP
	}
	k := harness.StartKproxyDemo(t,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL="+protocol,
		"OTEL_SERVICE_NAME=kproxy",
	)

	var (
		producerID = "e2e-producer-" + name
		consumerID = "e2e-consumer-" + name
		group      = "e2e-group-" + name
		traceID    = randomHex(t, 16) // the producer's trace
		spanIDs    []string           // one producer span per record
	)
	records := make([]*kgo.Record, nRecords)
	for i := range records {
		spanIDs = append(spanIDs, randomHex(t, 8))
		records[i] = &kgo.Record{
			Topic:   topic,
			Key:     fmt.Appendf(nil, "order-%d", i),
			Value:   fmt.Appendf(nil, "order %d via kproxy over %s", i, protocol),
			Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-" + traceID + "-" + spanIDs[i] + "-01")}},
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dials := new(harness.Dials)
	roundTrip(ctx, t, k.Addr, dials, producerID, consumerID, group, records)
	dials.RequireOnly(t, k.Addr)

	// SIGTERM: kproxy drains, then flushes its queued spans to Jaeger.
	k.Shutdown(t, 30*time.Second)

	// Produce: linked to every record's producer span.
	linked := func(s harness.Span) bool {
		return slices.ContainsFunc(s.References, func(r harness.Reference) bool { return r.TraceID == traceID })
	}
	produce, ok := j.WaitSpans(t, query("Produce "+topic), spanWait, func(spans []harness.Span) bool {
		got := map[string]bool{}
		for _, s := range spans {
			for _, r := range s.References {
				if r.TraceID == traceID {
					got[r.SpanID] = true
				}
			}
		}
		return len(got) == len(spanIDs)
	})
	if !ok {
		t.Fatalf("within %v Jaeger got no %q spans linking to all %d producer spans of trace %s; spans seen: %s",
			spanWait, "Produce "+topic, len(spanIDs), traceID, summary(produce))
	}
	linkedSpanIDs := map[string]bool{}
	var example harness.Span
	for _, s := range produce {
		if !linked(s) {
			continue
		}
		example = s
		requireProcess(t, s)
		requireTags(t, s, map[string]string{
			"messaging.system":                   "kafka",
			"messaging.operation.name":           "Produce",
			"messaging.operation.type":           "send",
			"messaging.destination.name":         topic,
			"messaging.destination.partition.id": "0",
			"messaging.client.id":                producerID,
			"span.kind":                          "client",
			"kproxy.api_key":                     apiKeyPro,
			"kproxy.body_decoded":                "true",
		})
		if _, ok := s.Tag("error.type"); ok {
			t.Errorf("Produce span %s is marked an error: %s", s.SpanID, s.TagOr("error.type"))
		}
		if _, ok := s.Tag("kproxy.links_incomplete"); ok {
			t.Errorf("Produce span %s says its links are incomplete, with uncompressed batches", s.SpanID)
		}
		for _, r := range s.References {
			if r.TraceID != traceID {
				t.Errorf("Produce span %s has a reference to an unexpected trace: %+v", s.SpanID, r)
				continue
			}
			// Jaeger shows OpenTelemetry span links as FOLLOWS_FROM.
			if r.RefType != "FOLLOWS_FROM" {
				t.Errorf("Produce span %s: link to %s/%s has refType %q, want FOLLOWS_FROM", s.SpanID, r.TraceID, r.SpanID, r.RefType)
			}
			if !slices.Contains(spanIDs, r.SpanID) {
				t.Errorf("Produce span %s links to span %s, which is none of the records' %v", s.SpanID, r.SpanID, spanIDs)
			}
			linkedSpanIDs[r.SpanID] = true
		}
		if s.TraceID == traceID {
			t.Errorf("Produce span %s is in the producer's trace; kproxy should link to it, not join it", s.SpanID)
		}
	}
	if len(linkedSpanIDs) != len(spanIDs) {
		t.Errorf("Produce spans link to %d of the %d record spans", len(linkedSpanIDs), len(spanIDs))
	}
	t.Logf("a Produce span as Jaeger's /api/traces returns it:\n%s", example.JSON())

	// The same links through the v3 (OTLP JSON) API.
	v3, err := j.SpansV3(ctx, "kproxy", "Produce "+topic, 10*time.Minute)
	if err != nil {
		t.Errorf("/api/v3/traces: %v", err)
	}
	v3Linked := map[string]bool{}
	for _, s := range v3 {
		for _, l := range s.Links {
			if strings.EqualFold(l.TraceID, traceID) {
				v3Linked[strings.ToLower(l.SpanID)] = true
			}
		}
		if s.Kind != 3 { // SPAN_KIND_CLIENT
			t.Errorf("v3 span %s %q has kind %d, want 3 (client)", s.SpanID, s.Name, s.Kind)
		}
	}
	if len(v3Linked) != len(spanIDs) {
		t.Errorf("/api/v3/traces: Produce spans link to %d of the %d record spans (%d spans)", len(v3Linked), len(spanIDs), len(v3))
	}

	// Fetch by the consumer: named for the topic when the request names
	// one (an incremental fetch session's later requests may name none).
	fetch, ok := j.WaitSpans(t, query("Fetch "+topic), spanWait, func(spans []harness.Span) bool {
		return slices.ContainsFunc(spans, func(s harness.Span) bool { return s.TagOr("messaging.client.id") == consumerID })
	})
	if !ok {
		t.Fatalf("no %q span from client %s in Jaeger; spans seen: %s", "Fetch "+topic, consumerID, summary(fetch))
	}
	var fetchOK bool
	for _, s := range fetch {
		if s.TagOr("messaging.client.id") != consumerID {
			continue
		}
		requireProcess(t, s)
		requireTags(t, s, map[string]string{
			"messaging.system":           "kafka",
			"messaging.operation.name":   "Fetch",
			"messaging.operation.type":   "receive",
			"messaging.destination.name": topic,
			"span.kind":                  "client",
			"kproxy.api_key":             apiKeyFet,
		})
		if _, failed := s.Tag("error.type"); !failed {
			fetchOK = true
		}
	}
	if !fetchOK {
		t.Errorf("every %q span of client %s is an error: %s", "Fetch "+topic, consumerID, summary(fetch))
	}

	// JoinGroup, with the group.
	join, ok := j.WaitSpans(t, query("JoinGroup"), spanWait, func(spans []harness.Span) bool {
		return slices.ContainsFunc(spans, func(s harness.Span) bool { return s.TagOr("messaging.consumer.group.name") == group })
	})
	if !ok {
		t.Fatalf("no JoinGroup span for group %s in Jaeger; spans seen: %s", group, summary(join))
	}
	for _, s := range join {
		if s.TagOr("messaging.consumer.group.name") != group {
			continue
		}
		requireProcess(t, s)
		requireTags(t, s, map[string]string{
			"messaging.system":    "kafka",
			"messaging.client.id": consumerID,
			"span.kind":           "client",
			"kproxy.api_key":      apiKeyJG,
		})
	}

	// OffsetCommit: settle, with the group and the topic.
	commit, ok := j.WaitSpans(t, query("OffsetCommit "+topic), spanWait, func(spans []harness.Span) bool {
		return slices.ContainsFunc(spans, func(s harness.Span) bool { return s.TagOr("messaging.consumer.group.name") == group })
	})
	if !ok {
		t.Fatalf("no %q span for group %s in Jaeger; spans seen: %s", "OffsetCommit "+topic, group, summary(commit))
	}
	for _, s := range commit {
		if s.TagOr("messaging.consumer.group.name") == group {
			requireTags(t, s, map[string]string{"messaging.operation.type": "settle", "messaging.client.id": consumerID})
		}
	}
}

// roundTrip creates the topic, produces records and consumes them back
// through kproxy in a consumer group, comparing what came back.
func roundTrip(ctx context.Context, t *testing.T, addr string, dials *harness.Dials, producerID, consumerID, group string, records []*kgo.Record) {
	t.Helper()
	common := []kgo.Opt{kgo.SeedBrokers(addr), kgo.Dialer(dials.DialContext)}

	adm, err := kgo.NewClient(append(common, kgo.ClientID("e2e-admin"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if resp, err := kadm.NewClient(adm).CreateTopic(ctx, 1, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("creating topic %s through kproxy: %v %v", topic, err, resp.Err)
	}

	producer, err := kgo.NewClient(append(common,
		kgo.ClientID(producerID),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("producing through kproxy: %v", err)
	}
	producer.Close()

	consumer, err := kgo.NewClient(append(common,
		kgo.ClientID(consumerID),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	)...)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var got []*kgo.Record
	for len(got) < len(records) {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records through kproxy before %v", len(got), len(records), err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("consuming %s/%d through kproxy: %v", tp, p, err) })
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		want := records[i]
		if string(r.Key) != string(want.Key) || string(r.Value) != string(want.Value) ||
			len(r.Headers) != 1 || r.Headers[0].Key != "traceparent" || string(r.Headers[0].Value) != string(want.Headers[0].Value) {
			t.Fatalf("record %d came back as key %q value %q headers %v; want key %q value %q headers %v",
				i, r.Key, r.Value, r.Headers, want.Key, want.Value, want.Headers)
		}
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing offsets through kproxy: %v", err)
	}
	consumer.Close() // leaves the group
}

func query(operation string) url.Values {
	return url.Values{"service": {"kproxy"}, "operation": {operation}, "limit": {"1000"}}
}

func requireProcess(t *testing.T, s harness.Span) {
	t.Helper()
	if s.Process.ServiceName != "kproxy" {
		t.Errorf("span %s %q has service %q, want kproxy", s.SpanID, s.OperationName, s.Process.ServiceName)
	}
}

func requireTags(t *testing.T, s harness.Span, want map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got := s.TagOr(k); got != want[k] {
			t.Errorf("span %s %q: tag %s = %s, want %s", s.SpanID, s.OperationName, k, got, want[k])
		}
	}
}

// summary lists spans briefly for failure messages.
func summary(spans []harness.Span) string {
	if len(spans) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, s := range spans {
		if i == 20 {
			fmt.Fprintf(&b, "\n  ... %d more", len(spans)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s %q client=%s group=%s error=%s refs=%v", s.SpanID, s.OperationName,
			s.TagOr("messaging.client.id"), s.TagOr("messaging.consumer.group.name"), s.TagOr("error.type"), s.References)
	}
	return b.String()
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
