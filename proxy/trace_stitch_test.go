package proxy

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/tracing"
)

// redirect is a dialer that sends every connection to one address,
// whatever the client asks for: the consumer's pod, whose kproxy is not
// the one the broker advertises.
type redirect struct{ to string }

func (r redirect) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	return d.DialContext(ctx, network, r.to)
}

func (r redirect) Dial(network, addr string) (net.Conn, error) {
	return r.DialContext(context.Background(), network, addr)
}

// One trace from the producer's pod to the consumer's: franz-go (every
// codec, idempotent), sarama and kafka-go produce through a kproxy that
// injects, and franz-go consumes through a second kproxy that links
// fetches. Every record produced without trace context arrives with one
// traceparent naming a Produce span of the first kproxy; every record
// produced with its own arrives with its headers byte for byte; none is
// lost or doubled; and the second kproxy's Fetch spans link to the
// first's Produce spans.
func TestTraceStitchAcrossTwoProxies(t *testing.T) {
	const topic = "stitch"
	trA, spansA := newTestTracer(t, func(c *tracing.Config) { c.Enabled, c.Propagation.Inject = true, true })
	trB, spansB := newTestTracer(t, func(c *tracing.Config) {
		c.Enabled, c.Links.Fetch, c.Links.Decompress, c.Links.Max = true, true, true, 1000
	})
	producerPod := startTracedKfake(t, []kfake.Opt{kfake.SeedTopics(1, topic)}, trA)
	consumerPod := startTracedProxy(t, producerPod.cluster.ListenAddrs()[0], trB)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	userTP := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	want := map[string]bool{} // value -> produced with its own traceparent
	produce := func(name string, n int, send func(value string, own bool)) {
		for i := range n {
			v := fmt.Sprintf("%s-%d", name, i)
			own := i%5 == 0
			want[v] = own
			send(v, own)
		}
	}
	userHeaders := func(own bool) []kgo.RecordHeader {
		if own {
			return []kgo.RecordHeader{{Key: "app", Value: []byte("1")}, {Key: "traceparent", Value: []byte(userTP)}}
		}
		return []kgo.RecordHeader{{Key: "app", Value: []byte("1")}}
	}
	for _, codec := range []struct {
		name string
		c    kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(producerPod.addr), kgo.ProducerBatchCompression(codec.c),
			kgo.ProducerLinger(0))
		if err != nil {
			t.Fatal(err)
		}
		produce("franz-"+codec.name, 20, func(v string, own bool) {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v), Headers: userHeaders(own)}).FirstErr(); err != nil {
				t.Fatalf("franz-go %s: %v", codec.name, err)
			}
		})
		cl.Close()
	}

	scfg := sarama.NewConfig()
	scfg.Version = sarama.V3_6_0_0
	scfg.Producer.Return.Successes = true
	scfg.Producer.RequiredAcks = sarama.WaitForAll
	scfg.Producer.Compression = sarama.CompressionSnappy
	sp, err := sarama.NewSyncProducer([]string{producerPod.addr}, scfg)
	if err != nil {
		t.Fatal(err)
	}
	produce("sarama", 20, func(v string, own bool) {
		m := &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)}
		for _, h := range userHeaders(own) {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		if _, _, err := sp.SendMessage(m); err != nil {
			t.Fatalf("sarama: %v", err)
		}
	})
	sp.Close()

	kt := &kafka.Transport{ClientID: "kproxy-kafka-go-test"}
	defer kt.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(producerPod.addr), Topic: topic, RequiredAcks: kafka.RequireAll,
		Compression: kafka.Lz4, BatchTimeout: time.Millisecond, Transport: kt}
	produce("kafka-go", 20, func(v string, own bool) {
		m := kafka.Message{Value: []byte(v)}
		for _, h := range userHeaders(own) {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
		if err := w.WriteMessages(ctx, m); err != nil {
			t.Fatalf("kafka-go: %v", err)
		}
	})
	w.Close()

	// The consumer's pod: every connection to the second kproxy.
	cons, err := kgo.NewClient(kgo.SeedBrokers(consumerPod.addr), kgo.Dialer(redirect{consumerPod.addr}.DialContext),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	injected := map[string]bool{} // the span ids named in consumed records
	seen := map[string]bool{}
	for len(seen) < len(want) {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records", len(seen), len(want))
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			own, ok := want[v]
			if !ok || seen[v] {
				t.Fatalf("record %q unexpected or doubled", v)
			}
			seen[v] = true
			var tps []string
			for _, h := range r.Headers {
				if h.Key == "traceparent" {
					tps = append(tps, string(h.Value))
				}
			}
			if own {
				if len(r.Headers) != 2 || r.Headers[0].Key != "app" || string(r.Headers[0].Value) != "1" || len(tps) != 1 || tps[0] != userTP {
					t.Fatalf("%s: a record produced with its own traceparent arrived with %v", v, r.Headers)
				}
				return
			}
			if len(tps) != 1 || r.Headers[0].Key != "app" || !strings.HasPrefix(tps[0], "00-") || len(tps[0]) != 55 {
				t.Fatalf("%s: headers %v, want app and one injected traceparent", v, r.Headers)
			}
			injected[tps[0][36:52]] = true
		})
	}
	cons.Close()

	produces := map[string]bool{}
	for _, s := range spansA() {
		if s.Name == framing.Name(framing.KeyProduce)+" "+topic {
			produces[s.SpanContext.SpanID().String()] = true
		}
	}
	for sid := range injected {
		if !produces[sid] {
			t.Fatalf("a consumed record names span %s, which is no Produce span of the producer's kproxy", sid)
		}
	}
	linked := map[string]bool{}
	fetches := 0
	for _, s := range spansB() {
		if s.Name != framing.Name(framing.KeyFetch)+" "+topic {
			continue
		}
		fetches++
		for _, l := range s.Links {
			linked[l.SpanContext.SpanID().String()] = true
		}
	}
	for sid := range injected {
		if !linked[sid] {
			t.Fatalf("no Fetch span of the consumer's kproxy (%d) links to Produce span %s", fetches, sid)
		}
	}
	if len(injected) == 0 {
		t.Fatal("no record consumed carries an injected traceparent")
	}
}
