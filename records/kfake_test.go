package records

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A batch rewritten with a header on each record is accepted by a broker
// (kfake checks the CRC and the lengths) and read back by franz-go with
// the header there and everything else as produced, for every codec.
func TestRewrittenBatchAcceptedAndRead(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "rewritten"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// kgo sends the newest Produce both sides know, which names the
	// topic by id.
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("rewritten")
	md.Topics = append(md.Topics, mt)
	mr, err := md.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	id := mr.Topics[0].TopicID
	recs := testRecords()
	cases := codecCases(t, recs)
	names := []string{"none", "gzip", "snappy-raw", "snappy-xerial", "lz4", "zstd", "zstd-stream"}
	for _, name := range names {
		b, _, err := Decode(cases[name], nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Records {
			b.Records[i].Headers = append(b.Records[i].Headers, kmsg.Header{Key: "traceparent", Value: []byte(name)})
		}
		batch, _, err := b.Encode(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "rewritten", id
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("%s: the broker refused the rewritten batch: error %d", name, code)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("rewritten"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []*kgo.Record
	for len(got) < len(names)*len(recs) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(got), len(names)*len(recs))
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
	for i, r := range got {
		name, want := names[i/len(recs)], recs[i%len(recs)]
		h := r.Headers[len(r.Headers)-1]
		if h.Key != "traceparent" || string(h.Value) != name || len(r.Headers) != len(want.Headers)+1 {
			t.Fatalf("%s record %d: headers %+v", name, i%len(recs), r.Headers)
		}
		if !sameBytes(r.Key, want.Key) || !sameBytes(r.Value, want.Value) {
			t.Fatalf("%s record %d: key %q value %q, want %q %q", name, i%len(recs), r.Key, r.Value, want.Key, want.Value)
		}
	}
}
