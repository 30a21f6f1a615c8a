package cluster

import (
	"strconv"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// fetchFrame is a Fetch v16 response of parts partitions sharing ~1 MiB of
// (garbage) records, with NodeEndpoints for nodes when any.
func fetchFrame(parts int, nodes []int32) []byte {
	r := kmsg.NewPtrFetchResponse()
	r.Version = 16
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "bench"
	for i := 0; i < parts; i++ {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = int32(i)
		p.RecordBatches = garbage(1 << 20 / parts)
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = []kmsg.FetchResponseTopic{t}
	for _, n := range nodes {
		b := kmsg.NewFetchResponseBroker()
		b.NodeID = n
		b.Host, b.Port = realAddr(n)
		r.Brokers = append(r.Brokers, b)
	}
	return frameOf(r)
}

func benchRewrite(b *testing.B, frame []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if _, _, err := Rewrite(frame, framing.KeyFetch, 16, testMapper); err != nil {
			b.Fatal(err)
		}
	}
}

// The common case: no NodeEndpoints tag, records skipped by length. It
// must not allocate.
func BenchmarkFetch1MiBNoTag(b *testing.B)        { benchRewrite(b, fetchFrame(1, nil)) }
func BenchmarkFetch1MiB64PartsNoTag(b *testing.B) { benchRewrite(b, fetchFrame(64, nil)) }

// With the tag (a leader moved): the frame is rebuilt, copying it once.
func BenchmarkFetch1MiBWithTag(b *testing.B) { benchRewrite(b, fetchFrame(1, []int32{0, 1, 2})) }

// TestFetchNoTagAllocatesNothing holds the common case to zero allocations
// (an assertion of behaviour, not of speed).
func TestFetchNoTagAllocatesNothing(t *testing.T) {
	frame := fetchFrame(64, nil)
	n := testing.AllocsPerRun(20, func() {
		out, _, err := Rewrite(frame, framing.KeyFetch, 16, testMapper)
		if err != nil || &out[0] != &frame[0] {
			t.Fatal("rewritten without a tag", err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per Fetch without NodeEndpoints, want 0", n)
	}
}

// metadataFrame is a Metadata v12 response of three brokers and topics
// topics of ten partitions each, replicated three times.
func metadataFrame(topics int) []byte {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = 12
	for n := int32(0); n < 3; n++ {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = n
		b.Host, b.Port = realAddr(n)
		r.Brokers = append(r.Brokers, b)
	}
	for i := 0; i < topics; i++ {
		t := kmsg.NewMetadataResponseTopic()
		name := "topic-" + string(rune('a'+i%26)) + "-" + string(rune('a'+i/26%26)) + "-" + string(rune('a'+i/676%26))
		t.Topic = &name
		for p := int32(0); p < 10; p++ {
			pp := kmsg.NewMetadataResponseTopicPartition()
			pp.Partition, pp.Leader = p, p%3
			pp.Replicas, pp.ISR = []int32{0, 1, 2}, []int32{0, 1, 2}
			t.Partitions = append(t.Partitions, pp)
		}
		r.Topics = append(r.Topics, t)
	}
	return frameOf(r)
}

// BenchmarkRewriteMetadata is the cost of a Metadata rewrite, which the
// relay may run on a poller: a client's metadata of many topics.
func BenchmarkRewriteMetadata(b *testing.B) {
	for _, topics := range []int{10, 1000} {
		frame := metadataFrame(topics)
		b.Run(strconv.Itoa(topics)+"topics", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				if _, _, err := Rewrite(frame, framing.KeyMetadata, 12, testMapper); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// smallFrames are the responses kbench's null broker gives its load: one
// topic, one partition, no NodeEndpoints (a Produce v10 ack, and a Fetch
// v16 answer with 113 bytes of records).
func smallFrames() (produce, fetch []byte) {
	p := kmsg.NewPtrProduceResponse()
	p.Version = 10
	pt := kmsg.NewProduceResponseTopic()
	pt.Topic = "kbench"
	pt.Partitions = []kmsg.ProduceResponseTopicPartition{kmsg.NewProduceResponseTopicPartition()}
	p.Topics = []kmsg.ProduceResponseTopic{pt}
	f := kmsg.NewPtrFetchResponse()
	f.Version = 16
	ft := kmsg.NewFetchResponseTopic()
	ft.Partitions = []kmsg.FetchResponseTopicPartition{kmsg.NewFetchResponseTopicPartition()}
	ft.Partitions[0].RecordBatches = garbage(113)
	f.Topics = []kmsg.FetchResponseTopic{ft}
	return frameOf(p), frameOf(f)
}

// benchFronting measures what the relay pays per response in cluster mode:
// Fronting.Rewrite, the hook it calls.
func benchFronting(b *testing.B, frame []byte, key, version int16) {
	cfg := Config{NodePortBase: 9100, NodeIDs: NodeIDRange{Min: 0, Max: 99}}
	f := NewFronting(cfg, "127.0.0.1", NewTopology(cfg, zerolog.Nop()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Rewrite(frame, key, version); err != nil {
			b.Fatal(err)
		}
	}
}

// The responses of kbench's cluster-mode load: what the walk costs per
// small response, next to the ~1.4µs of CPU kproxy spends per request.
func BenchmarkFrontingProduceV10Small(b *testing.B) {
	p, _ := smallFrames()
	benchFronting(b, p, framing.KeyProduce, 10)
}

func BenchmarkFrontingFetchV16Small(b *testing.B) {
	_, f := smallFrames()
	benchFronting(b, f, framing.KeyFetch, 16)
}

// Produce v9 cannot carry the tag: the version check alone.
func BenchmarkFrontingProduceV9(b *testing.B) {
	p := kmsg.NewPtrProduceResponse()
	p.Version = 9
	benchFronting(b, frameOf(p), framing.KeyProduce, 9)
}
