package records

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"

	"github.com/kproxy/kproxy/internal/batchtest"
)

// produceFrame is a whole Produce request frame of version v: two topics,
// the first with two partitions, each partition one batch (as Kafka
// requires of v2 batches): uncompressed in one/0, snappy in the others.
func produceFrame(t *testing.T, v int16, topicID [16]byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = v, -1, 5000
	for ti, name := range []string{"one", "two"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = name, topicID
		for p := range 2 - ti {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(p)
			rp.Records = batchtest.MakeBatch(batchtest.Snappy, 1, batchtest.SnappyRaw(batchtest.EncodeRecords(kmsg.Record{Key: []byte("k"), Value: []byte("c")})))
			if ti == 0 && p == 0 {
				rp.Records = batchtest.PlainBatch(kmsg.Record{Value: []byte("a")}, kmsg.Record{Value: []byte("b")})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("producer-1")).AppendRequest(nil, req, 77)
}

// addHeader is a Change that gives every record of a snappy batch a
// header.
func addHeader(t *testing.T) Change {
	return func(topic string, partition int32, batch []byte) []byte {
		if CodecOf(batch) != batchtest.Snappy {
			return nil
		}
		b, _, err := Decode(batch, nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b.Records {
			b.Records[i].Headers = append(b.Records[i].Headers, kmsg.Header{Key: "traceparent", Value: []byte(topic)})
		}
		out, _, err := b.Encode(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// Every Produce version that carries v2 batches: the rewritten frame's
// size prefix and header are right, the batches not changed are
// byte-equal, the changed ones carry the header.
func TestRewriteProduceEveryVersion(t *testing.T) {
	for v := int16(3); v <= 13; v++ {
		frame := produceFrame(t, v, [16]byte{1})
		h, err := framing.ParseRequestHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		out, changed, err := RewriteProduce(nil, frame, h, addHeader(t))
		if err != nil || !changed {
			t.Fatalf("v%d: changed %v, %v", v, changed, err)
		}
		if int(binary.BigEndian.Uint32(out)) != len(out)-4 {
			t.Fatalf("v%d: size prefix %d for %d bytes", v, binary.BigEndian.Uint32(out), len(out)-4)
		}
		if !bytes.Equal(out[:h.BodyOffset][4:], frame[4:h.BodyOffset]) {
			t.Fatalf("v%d: the request header changed", v)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version = v
		if err := req.ReadFrom(out[h.BodyOffset:]); err != nil {
			t.Fatalf("v%d: the rewritten body does not decode: %v", v, err)
		}
		var orig kmsg.ProduceRequest
		orig.Version = v
		orig.ReadFrom(frame[h.BodyOffset:])
		for ti, rt := range req.Topics {
			for pi, rp := range rt.Partitions {
				was := orig.Topics[ti].Partitions[pi].Records
				if CodecOf(was) == 0 {
					if !bytes.Equal(rp.Records, was) {
						t.Fatalf("v%d %s/%d: the untouched batch changed", v, rt.Topic, rp.Partition)
					}
					continue
				}
				b, _, err := Decode(rp.Records, nil, 1<<20)
				if err != nil || len(b.Records) != 1 || len(b.Records[0].Headers) != 1 {
					t.Fatalf("v%d %s/%d: the changed batch: %+v %v", v, rt.Topic, rp.Partition, b.Records, err)
				}
			}
		}
	}
}

// A change that changes nothing leaves the frame alone.
func TestRewriteProduceUnchanged(t *testing.T) {
	frame := produceFrame(t, 9, [16]byte{})
	h, _ := framing.ParseRequestHeader(frame)
	dst := []byte("kept")
	out, changed, err := RewriteProduce(dst, frame, h, func(string, int32, []byte) []byte { return nil })
	if err != nil || changed || string(out) != "kept" {
		t.Fatalf("changed %v, %q, %v", changed, out, err)
	}
}

// A rewritten frame, written raw to a broker, is answered with no error
// for every partition (kfake reads the frame and checks each batch's CRC).
func TestRewrittenProduceAccepted(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "one", "two"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn, err := net.DialTimeout("tcp", c.ListenAddrs()[0], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	for _, v := range []int16{7, 9} { // before and after flexible versions
		frame := produceFrame(t, v, [16]byte{})
		h, _ := framing.ParseRequestHeader(frame)
		out, _, err := RewriteProduce(nil, frame, h, addHeader(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(out); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			t.Fatal(err)
		}
		resp := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, resp); err != nil {
			t.Fatal(err)
		}
		pr := kmsg.NewPtrProduceResponse()
		pr.Version = v
		off := 4
		if v >= 9 {
			off++ // the response header's empty tag section
		}
		if err := pr.ReadFrom(resp[off:]); err != nil {
			t.Fatal(err)
		}
		for _, rt := range pr.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("v%d %s/%d: error %d", v, rt.Topic, rp.Partition, rp.ErrorCode)
				}
			}
		}
	}
}
