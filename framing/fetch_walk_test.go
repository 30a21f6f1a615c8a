package framing_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// walked is a partition as a test compares it.
func walkedKey(topic []byte, id [16]byte, p int32) string {
	if topic != nil {
		return fmt.Sprintf("%s/%d", topic, p)
	}
	return fmt.Sprintf("%x/%d", id[:2], p)
}

// TestWalkFetchRequestEveryVersion reads back what kmsg wrote in every
// Fetch version: isolation, session, each partition's fetch offset and
// each forgotten partition.
func TestWalkFetchRequestEveryVersion(t *testing.T) {
	for v := int16(0); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
		req, frame := rackFetch(v, "")
		req.IsolationLevel = 1
		frame = kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 7)
		h, err := framing.ParseRequestHeader(frame)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		info, ok := framing.WalkFetchRequest(frame, h, func(p framing.FetchPartition) {
			k := walkedKey(p.Topic, p.TopicID, p.Partition)
			if p.Forgotten {
				k = "forgotten " + k
			}
			got[k] = p.Offset
		})
		if !ok {
			t.Fatalf("v%d: not walked", v)
		}
		want := map[string]int64{}
		for _, tp := range req.Topics {
			name := []byte(tp.Topic)
			if v >= 13 {
				name = nil
			}
			for _, p := range tp.Partitions {
				want[walkedKey(name, tp.TopicID, p.Partition)] = p.FetchOffset
			}
		}
		if v >= 7 {
			for _, ft := range req.ForgottenTopics {
				name := []byte(ft.Topic)
				if v >= 13 {
					name = nil
				}
				for _, p := range ft.Partitions {
					want["forgotten "+walkedKey(name, ft.TopicID, p)] = -1
				}
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("v%d: walked %v, want %v", v, got, want)
		}
		wantIso, wantID, wantEpoch := int8(1), int32(9), int32(2)
		if v < 4 {
			wantIso = 0
		}
		if v < 7 {
			wantID, wantEpoch = 0, -1
		}
		if info.Isolation != wantIso || info.SessionID != wantID || info.SessionEpoch != wantEpoch {
			t.Fatalf("v%d: isolation %d session %d/%d, want %d %d/%d", v, info.Isolation, info.SessionID, info.SessionEpoch, wantIso, wantID, wantEpoch)
		}
		if info.Full() != (v < 7) {
			t.Fatalf("v%d: Full %v", v, info.Full())
		}
		for cut := h.BodyOffset; cut < len(frame); cut += 3 {
			if _, ok := framing.WalkFetchRequest(frame[:cut], h, nil); ok {
				t.Fatalf("v%d cut at %d of %d: walked", v, cut, len(frame))
			}
		}
	}
}

// fetchResponse is a Fetch response of version v with two topics: one
// partition with a batch stamped at create time 1000 (max 1500), one with
// a log-append-time batch (base 1000, max 2000), one with no records and
// an error.
func fetchResponse(v int16) (*kmsg.FetchResponse, []byte) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version, resp.ThrottleMillis, resp.SessionID = v, 3, 9
	batch := func(attrs int16) []byte {
		b := kmsg.RecordBatch{Magic: 2, Attributes: attrs, FirstTimestamp: 1000, MaxTimestamp: 1500 + int64(attrs)*62, ProducerID: -1,
			NumRecords: 1, Records: []byte{0}, Length: 49 + 1}
		if attrs != 0 {
			b.MaxTimestamp = 2000
		}
		return b.AppendTo(nil)
	}
	for i, name := range []string{"orders", "payments"} {
		tp := kmsg.NewFetchResponseTopic()
		tp.Topic, tp.TopicID = name, [16]byte{byte(i + 1)}
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.HighWatermark, p.LastStableOffset, p.PreferredReadReplica = int32(i), 100+int64(i), 90+int64(i), -1
		p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 5, FirstOffset: 7}}
		p.RecordBatches = batch(int16(i) << 3)
		tp.Partitions = append(tp.Partitions, p)
		if i == 1 {
			e := kmsg.NewFetchResponseTopicPartition()
			e.Partition, e.ErrorCode, e.HighWatermark = 4, 6, -1
			tp.Partitions = append(tp.Partitions, e)
		}
		resp.Topics = append(resp.Topics, tp)
	}
	frame := resp.AppendTo(nil)
	var hdr []byte
	hdr = append(hdr, 0, 0, 0, 7) // correlation id
	if v >= 12 {
		hdr = append(hdr, 0) // header tags
	}
	out := append([]byte{0, 0, 0, 0}, hdr...)
	out = append(out, frame...)
	n := len(out) - 4
	out[0], out[1], out[2], out[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return resp, out
}

// TestWalkFetchResponseEveryVersion reads each partition's error, high
// watermark, last stable offset and first batch timestamp in every Fetch
// version, never decoding records.
func TestWalkFetchResponseEveryVersion(t *testing.T) {
	for v := int16(0); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
		_, frame := fetchResponse(v)
		var got []string
		ok := framing.WalkFetchResponse(frame, v, func(p framing.FetchedPartition) {
			got = append(got, fmt.Sprintf("%s err %d hw %d lso %d ts %d", walkedKey(p.Topic, p.TopicID, p.Partition), p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.FirstTimestamp))
		})
		if !ok {
			t.Fatalf("v%d: not walked", v)
		}
		name := func(n string, id byte, p int32) string {
			if v >= 13 {
				return walkedKey(nil, [16]byte{id}, p)
			}
			return walkedKey([]byte(n), [16]byte{}, p)
		}
		lso := func(x int64) int64 {
			if v < 4 {
				return -1
			}
			return x
		}
		// Before v2 (magic 0/1 message sets) a broker never sends magic 2
		// batches, but the walker reads what it finds.
		want := []string{
			fmt.Sprintf("%s err 0 hw 100 lso %d ts 1000", name("orders", 1, 0), lso(90)),
			fmt.Sprintf("%s err 0 hw 101 lso %d ts 2000", name("payments", 2, 1), lso(91)),
			fmt.Sprintf("%s err 6 hw -1 lso %d ts -1", name("payments", 2, 4), lso(-1)),
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("v%d:\n got %v\nwant %v", v, got, want)
		}
		for cut := 8; cut < len(frame); cut += 5 {
			if framing.WalkFetchResponse(frame[:cut], v, func(framing.FetchedPartition) {}) {
				t.Fatalf("v%d cut at %d of %d: walked", v, cut, len(frame))
			}
		}
	}
}

// Walking allocates nothing.
func TestWalkFetchAllocs(t *testing.T) {
	_, req := rackFetch(13, "")
	h, _ := framing.ParseRequestHeader(req)
	_, resp := fetchResponse(13)
	n := 0
	if a := testing.AllocsPerRun(100, func() {
		framing.WalkFetchRequest(req, h, func(p framing.FetchPartition) { n += int(p.Partition) })
		framing.WalkFetchResponse(resp, 13, func(p framing.FetchedPartition) { n += int(p.Partition) })
	}); a != 0 {
		t.Fatalf("%v allocations per walk", a)
	}
}
