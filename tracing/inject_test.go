package tracing

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/records"
)

// injectOn is a tracer that injects (and links fetches), every request
// sampled.
func injectOn(c *Config) {
	c.Enabled = true
	c.Propagation.Inject = true
	c.Links.Decompress = true
	c.Links.Fetch = true
}

// idempotent gives a batch a producer id, epoch and first sequence, as
// an idempotent producer's, with its CRC recomputed.
func idempotent(batch []byte) []byte {
	b := append([]byte(nil), batch...)
	binary.BigEndian.PutUint64(b[43:], 7)                                    // producer id
	binary.BigEndian.PutUint16(b[51:], 1)                                    // producer epoch
	binary.BigEndian.PutUint32(b[53:], 42)                                   // base sequence
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|0x10) // transactional bit
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// injectRecords are a produce's records: two without trace context (one
// with headers of its own), one with a user's traceparent.
func injectRecords(user trace.SpanContext) []kmsg.Record {
	return []kmsg.Record{
		{Key: []byte("a"), Value: []byte("plain")},
		{Key: []byte("b"), Value: []byte("with headers"), Headers: hdrs("app", "1")},
		tracedRecord(user),
	}
}

// batchOf builds a batch of recs in codec, framed as the named client
// writes it.
func batchOf(t *testing.T, codec string, recs []kmsg.Record) []byte {
	raw := encodeRecords(recs...)
	n := len(recs)
	switch codec {
	case "none":
		return makeBatch(0, n, raw)
	case "gzip":
		return makeBatch(codecGzip, n, gzipped(t, raw))
	case "snappy":
		return makeBatch(codecSnappy, n, snappyRaw(raw))
	case "snappy-xerial":
		return makeBatch(codecSnappy, n, xerial(raw, 16))
	case "lz4":
		return makeBatch(codecLZ4, n, lz4Framed(t, raw))
	case "zstd":
		return makeBatch(codecZstd, n, zstdStream(t, raw))
	}
	t.Fatalf("codec %s", codec)
	return nil
}

// producedBatch decodes the one batch of a Produce frame.
func producedBatch(t *testing.T, frame []byte) (records.Batch, []byte) {
	t.Helper()
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		t.Fatalf("frame size prefix %d, frame %d", binary.BigEndian.Uint32(frame), len(frame)-4)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(h.APIVersion)
	if err := req.ReadFrom(frame[h.BodyOffset:]); err != nil {
		t.Fatal(err)
	}
	raw := req.Topics[0].Partitions[0].Records
	b, _, err := records.Decode(raw, nil, 1<<20)
	if err != nil {
		t.Fatalf("re-encoded batch does not decode: %v", err)
	}
	return b, raw
}

// A sampled Produce's untraced records get a traceparent naming its span,
// in every codec and every Produce version that carries v2 batches (v3
// to the newest kmsg knows, flexible or not); the record a
// user traced, every other header and field, and the batch's producer
// id, epoch, sequence and attributes are kept; the exported span has the
// ids the records name.
func TestInjectTraceparent(t *testing.T) {
	user := spanCtx(0xaa, 1, true)
	for version := int16(3); version <= kmsg.NewPtrProduceRequest().MaxVersion(); version++ { // every version of v2 batches
		for _, codec := range []string{"none", "gzip", "snappy", "snappy-xerial", "lz4", "zstd"} {
			t.Run(fmt.Sprintf("%s/v%d", codec, version), func(t *testing.T) {
				tr, reg, spans := tracerWithRegistry(t, injectOn)
				recs := injectRecords(user)
				in := idempotent(batchOf(t, codec, recs))
				frame := requestFrame(produceReq(version, produceTopic("orders", [16]byte{}, in)), 5)
				body := bodyOf(t, frame)
				s := tr.Start(testPeer, body, 9, len(frame), time.Now())
				if s == nil {
					t.Fatal("sampled produce: no span")
				}
				out := tr.Inject(s, frame, body.Header())
				if bytes.Equal(out, frame) {
					t.Fatal("frame unchanged")
				}
				got, raw := producedBatch(t, out)
				want, _, err := records.Decode(in, nil, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				gh, wh := got.Header, want.Header
				gh.Records, wh.Records, gh.CRC, wh.CRC, gh.Length, wh.Length = nil, nil, 0, 0, 0, 0
				if !reflect.DeepEqual(gh, wh) {
					t.Fatalf("batch header changed:\n got %+v\nwant %+v", gh, wh)
				}
				if records.CodecOf(raw) != records.CodecOf(in) {
					t.Fatalf("codec %d, want %d", records.CodecOf(raw), records.CodecOf(in))
				}
				tr.End(s, framing.KeyProduce, version, nil)
				stubs := spans()
				if len(stubs) != 1 {
					t.Fatalf("%d spans", len(stubs))
				}
				sc := stubs[0].SpanContext
				tp := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
				for i, r := range got.Records {
					w := want.Records[i]
					if !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || r.OffsetDelta != w.OffsetDelta ||
						r.TimestampDelta != w.TimestampDelta || r.Attributes != w.Attributes {
						t.Fatalf("record %d changed: %+v, want %+v", i, r, w)
					}
					if i == 2 { // the user's: as it came
						if len(r.Headers) != len(w.Headers) || string(r.Headers[1].Value) != traceparent(user) {
							t.Fatalf("the user's traced record changed: %+v", r.Headers)
						}
						continue
					}
					if len(r.Headers) != len(w.Headers)+1 || r.Headers[len(r.Headers)-1].Key != "traceparent" {
						t.Fatalf("record %d headers %+v", i, r.Headers)
					}
					for j := range w.Headers {
						if r.Headers[j].Key != w.Headers[j].Key || !bytes.Equal(r.Headers[j].Value, w.Headers[j].Value) {
							t.Fatalf("record %d header %d changed", i, j)
						}
					}
					if v := string(r.Headers[len(r.Headers)-1].Value); v != tp {
						t.Fatalf("record %d traceparent %s, the span is %s", i, v, tp)
					}
				}
				if n := attrInt(stubs[0].Attributes, attrInjected); n != 2 {
					t.Fatalf("kproxy.traceparent_injected = %d, want 2", n)
				}
				if n, _ := counter(t, reg, "kproxy_records_skipped_total"); n != 0 {
					t.Fatalf("%v batches skipped", n)
				}
			})
		}
	}
}

// Batches inject must leave as they came are relayed byte for byte and
// counted by reason: one whose every record is traced (not counted: there
// is nothing to do), one past max_batch_bytes, a control batch, one whose
// CRC fails; an unsampled produce is not even looked at.
func TestInjectLeavesBatches(t *testing.T) {
	user := spanCtx(0xaa, 1, true)
	untraced := []kmsg.Record{{Value: []byte("v")}}
	control := makeBatch(0, 1, encodeRecords(kmsg.Record{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}}))
	control = idempotent(control)
	control[22] |= 0x20
	binary.BigEndian.PutUint32(control[17:], crc32.Checksum(control[21:], crc32.MakeTable(crc32.Castagnoli)))
	broken := batchOf(t, "none", untraced)
	broken[len(broken)-1] ^= 1
	cases := []struct {
		name, reason string
		batch        []byte
		edit         func(*Config)
	}{
		{"all-traced", "", batchOf(t, "zstd", []kmsg.Record{tracedRecord(user)}), nil},
		{"too-big", skipTooBig, batchOf(t, "none", untraced), func(c *Config) { c.Propagation.MaxBatchBytes = 64 }},
		{"control", skipControl, control, nil},
		{"crc", skipMalformed, broken, nil},
		{"unsampled", "", batchOf(t, "none", untraced), func(c *Config) { zero := 0.0; c.SampleRatio = &zero }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, reg, _ := tracerWithRegistry(t, func(cfg *Config) {
				injectOn(cfg)
				if c.edit != nil {
					c.edit(cfg)
				}
			})
			frame := requestFrame(produceReq(9, produceTopic("orders", [16]byte{}, c.batch)), 5)
			body := bodyOf(t, frame)
			s := tr.Start(testPeer, body, 9, len(frame), time.Now())
			out := tr.Inject(s, frame, body.Header())
			if !bytes.Equal(out, frame) {
				t.Fatal("frame changed")
			}
			n, _ := counter(t, reg, "kproxy_records_skipped_total")
			if want := map[bool]float64{true: 1, false: 0}[c.reason != ""]; n != want {
				t.Fatalf("skipped %v, want %v", n, want)
			}
			if c.reason != "" {
				if got := skippedReason(t, reg); got != c.reason {
					t.Fatalf("reason %q, want %q", got, c.reason)
				}
			}
		})
	}
}

// A sampled Fetch span links to the distinct contexts in the returned
// records (compressed ones included with decompress) and counts them.
func TestFetchLinks(t *testing.T) {
	a, b := spanCtx(0xaa, 1, true), spanCtx(0xbb, 2, true)
	tr, _, spans := tracerWithRegistry(t, injectOn)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	topic := kmsg.NewFetchResponseTopic()
	topic.Topic = "orders"
	p := kmsg.NewFetchResponseTopicPartition()
	p.RecordBatches = concat(batchOf(t, "none", []kmsg.Record{tracedRecord(a), {Value: []byte("x")}}),
		batchOf(t, "lz4", []kmsg.Record{tracedRecord(b), tracedRecord(a)}))
	topic.Partitions = append(topic.Partitions, p)
	resp.Topics = append(resp.Topics, topic)
	req := fetchReq(11, "orders", [16]byte{}, 0)
	frame := requestFrame(req, 3)
	s := tr.Start(testPeer, bodyOf(t, frame), 9, len(frame), time.Now())
	tr.End(s, framing.KeyFetch, 11, responseFrame(resp, 9))
	stubs := spans()
	if len(stubs) != 1 {
		t.Fatalf("%d spans", len(stubs))
	}
	var got []trace.SpanContext
	for _, l := range stubs[0].Links {
		got = append(got, l.SpanContext)
	}
	wantContexts(t, got, a, b)
	if n := attrInt(stubs[0].Attributes, "messaging.batch.message_count"); n != 4 {
		t.Fatalf("messaging.batch.message_count = %d, want 4", n)
	}
}

// attrInt is an int attribute's value, -1 when absent.
func attrInt(kvs []attribute.KeyValue, key attribute.Key) int64 {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value.AsInt64()
		}
	}
	return -1
}

// skippedReason is the reason label of the one kproxy_records_skipped_total
// series.
func skippedReason(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kproxy_records_skipped_total" {
			return label(mf.GetMetric()[0], "reason")
		}
	}
	return ""
}

// Over OTLP too (the lean exporter), the exported span has the ids the
// injected traceparent names.
func TestInjectLeanExportKeepsIDs(t *testing.T) {
	recv := newOTLPReceiver(t)
	tr := leanTracer(t, recv.srv.URL, injectOn)
	frame := requestFrame(produceReq(9, produceTopic("orders", [16]byte{}, batchOf(t, "lz4", []kmsg.Record{{Value: []byte("v")}}))), 5)
	body := bodyOf(t, frame)
	s := tr.Start(testPeer, body, 9, len(frame), time.Now())
	out := tr.Inject(s, frame, body.Header())
	tr.End(s, framing.KeyProduce, 9, nil)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := producedBatch(t, out)
	tp := string(got.Records[0].Headers[0].Value)
	var spans []*tracepb.Span // as sent: normalized would clear the ids
	for _, r := range recv.resourceSpans() {
		for _, ss := range r.ScopeSpans {
			spans = append(spans, ss.Spans...)
		}
	}
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	want := "00-" + hex.EncodeToString(spans[0].TraceId) + "-" + hex.EncodeToString(spans[0].SpanId) + "-01"
	if tp != want {
		t.Fatalf("injected %s, exported span %s", tp, want)
	}
}
