package framing_test

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// rackFetch is a Fetch request of version v with two topics (three
// partitions, tags where the version has them), a forgotten topic and
// rack, encoded by kmsg behind a real header.
func rackFetch(v int16, rack string) (*kmsg.FetchRequest, []byte) {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.ReplicaID = v, 500, 1, 1<<20, -1
	req.SessionID, req.SessionEpoch, req.Rack = 9, 2, rack
	for i, name := range []string{"orders", "payments.eu"} {
		topic := kmsg.NewFetchRequestTopic()
		topic.Topic, topic.TopicID = name, [16]byte{byte(i + 1), 7}
		for p := int32(0); p <= int32(i); p++ {
			part := kmsg.NewFetchRequestTopicPartition()
			part.Partition, part.FetchOffset, part.PartitionMaxBytes, part.CurrentLeaderEpoch = p, 42+int64(p), 1<<20, 3
			part.ReplicaDirectoryID = [16]byte{9} // a tag in flexible versions
			topic.Partitions = append(topic.Partitions, part)
		}
		req.Topics = append(req.Topics, topic)
	}
	gone := kmsg.NewFetchRequestForgottenTopic()
	gone.Topic, gone.TopicID, gone.Partitions = "old", [16]byte{5}, []int32{0, 4}
	req.ForgottenTopics = append(req.ForgottenTopics, gone)
	if v >= 12 {
		req.ClusterID = kmsg.StringPtr("c1") // a request-level tag after rack_id
	}
	return req, kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 7)
}

// rackOf is where a Fetch request's rack_id is, as the relay reads it
// from the request's walk: ok false for versions without the field or a
// frame that does not walk.
func rackOf(frame []byte, h framing.RequestHeader) (off, n int, empty, ok bool) {
	info, ok := framing.WalkFetchRequest(frame, h, nil)
	if !ok || h.APIVersion < 11 {
		return 0, 0, false, false
	}
	return info.RackOffset, info.RackLen, info.RackEmpty, true
}

// fillRack is the splice kproxy's relay makes: the frame with rack in
// place of its empty rack_id, and the size prefix to match.
func fillRack(frame []byte, off, n int, rack string, v int16) []byte {
	out := append([]byte(nil), frame[:off]...)
	out = framing.EncodeRack(out, rack, v)
	out = append(out, frame[off+n:]...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-framing.SizeLen))
	return out
}

// TestFetchRackEveryVersion finds rack_id in Fetch requests of every
// version that has it, empty or set, and fills an empty one: kmsg reads
// the result back with the rack and every other field unchanged.
func TestFetchRackEveryVersion(t *testing.T) {
	for v := int16(11); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
		for _, own := range []string{"", "zone-b"} {
			want, frame := rackFetch(v, own)
			h, err := framing.ParseRequestHeader(frame)
			if err != nil {
				t.Fatal(err)
			}
			off, n, empty, ok := rackOf(frame, h)
			if !ok || empty != (own == "") {
				t.Fatalf("v%d rack %q: ok %v empty %v", v, own, ok, empty)
			}
			if got := string(framing.EncodeRack(nil, own, v)); got != string(frame[off:off+n]) {
				t.Fatalf("v%d rack %q: found %x, want %x", v, own, frame[off:off+n], got)
			}
			if own != "" {
				continue
			}
			filled := fillRack(frame, off, n, "zone-a", v)
			got := kmsg.NewPtrFetchRequest()
			got.Version = v
			h2, err := framing.ParseRequestHeader(filled)
			if err != nil {
				t.Fatal(err)
			}
			if err := got.ReadFrom(filled[h2.BodyOffset:]); err != nil {
				t.Fatalf("v%d filled: %v", v, err)
			}
			if got.Rack != "zone-a" {
				t.Fatalf("v%d: rack %q after the fill", v, got.Rack)
			}
			want.Rack = "zone-a"
			if a, b := want.AppendTo(nil), got.AppendTo(nil); string(a) != string(b) {
				t.Fatalf("v%d: the fill changed more than rack_id", v)
			}
			if _, _, empty, ok := rackOf(filled, h2); !ok || empty {
				t.Fatalf("v%d: the filled frame's rack reads ok %v empty %v", v, ok, empty)
			}
		}
	}
}

// TestFetchRackNotFound leaves alone what it cannot place: versions
// before rack_id, other keys and every truncation of a valid frame.
func TestFetchRackNotFound(t *testing.T) {
	_, old := rackFetch(10, "")
	h, _ := framing.ParseRequestHeader(old)
	if _, _, _, ok := rackOf(old, h); ok {
		t.Fatal("found rack_id in a Fetch v10")
	}
	for _, v := range []int16{11, 12, 13, kmsg.NewPtrFetchRequest().MaxVersion()} {
		_, frame := rackFetch(v, "")
		h, _ := framing.ParseRequestHeader(frame)
		for cut := h.BodyOffset; cut < len(frame); cut++ {
			if _, _, _, ok := rackOf(frame[:cut], h); ok {
				t.Fatalf("v%d cut at %d of %d: found rack_id", v, cut, len(frame))
			}
		}
		// A count that cannot fit in the frame.
		bad := append([]byte(nil), frame...)
		if v < 12 {
			binary.BigEndian.PutUint32(bad[h.BodyOffset+4+4+4+4+1+4+4:], 1<<30)
		} else {
			bad[h.BodyOffset+4+4+4+1+4+4] = 0x7f // topics: 126, far more than the frame holds
			if v <= 14 {
				bad[h.BodyOffset+4+4+4+4+1+4+4] = 0x7f
			}
		}
		if _, _, _, ok := rackOf(bad, h); ok {
			t.Fatalf("v%d: found rack_id behind a forged count", v)
		}
	}
	prod := kmsg.NewPtrProduceRequest()
	prod.Version = 9
	frame := kmsg.NewRequestFormatter().AppendRequest(nil, prod, 1)
	h, _ = framing.ParseRequestHeader(frame)
	if _, _, _, ok := rackOf(frame, h); ok {
		t.Fatal("found rack_id in a Produce")
	}
}
