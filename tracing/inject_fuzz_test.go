package tracing

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/batchtest"
	"github.com/kproxy/kproxy/records"
)

// Fuzzed batches in a Produce never panic the injector; a batch it
// changes passes its own CRC and keeps its records, and a batch it could
// not read goes as it came, byte for byte.
func FuzzInject(f *testing.F) {
	recs := []kmsg.Record{
		{Key: []byte("a"), Value: []byte("plain")},
		{Key: []byte("b"), Value: []byte("h"), Headers: batchtest.Headers("app", "1")},
		batchtest.TracedRecord(batchtest.Traceparent(0xaa)),
	}
	raw := batchtest.EncodeRecords(recs...)
	n := len(recs)
	f.Add(batchtest.PlainBatch(recs...), false)
	f.Add(batchtest.MakeBatch(batchtest.Gzip, n, batchtest.Gzipped(f, raw)), true)
	f.Add(batchtest.MakeBatch(batchtest.Snappy, n, batchtest.SnappyRaw(raw)), true)
	f.Add(batchtest.MakeBatch(batchtest.Snappy, n, batchtest.Xerial(raw, 16)), true)
	f.Add(batchtest.MakeBatch(batchtest.LZ4, n, batchtest.LZ4Framed(f, raw)), true)
	f.Add(batchtest.MakeBatch(batchtest.Zstd, n, batchtest.ZstdStream(f, raw)), true)
	f.Add(batchtest.Concat(batchtest.PlainBatch(recs[0]), batchtest.PlainBatch(recs[1])), false)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, batch []byte, fix bool) {
		if fix && len(batch) >= records.HeaderSize {
			// Length, magic and crc made right, so the fuzzer reaches
			// the records and the codecs past the checks.
			binary.BigEndian.PutUint32(batch[8:], uint32(len(batch)-12))
			batch[16] = 2
			binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], castagnoli))
		}
		tr, _, _ := tracerWithRegistry(t, injectOn)
		frame := requestFrame(produceReq(9, produceTopic("orders", [16]byte{}, batch)), 5)
		body := bodyOf(t, frame)
		s := tr.Start(testPeer, body, 9, len(frame), time.Now())
		if s == nil {
			t.Fatal("sampled produce: no span")
		}
		in := append([]byte(nil), frame...)
		out := tr.Inject(s, frame, body.Header())
		tr.End(s, framing.KeyProduce, 9, nil)
		if !bytes.Equal(frame, in) {
			t.Fatal("the frame given was written to")
		}
		if bytes.Equal(out, frame) {
			return
		}
		got := producedRecords(t, out)
		var before, after [][]byte
		records.EachBatch(batch, func(b []byte) bool { before = append(before, b); return true })
		records.EachBatch(got, func(b []byte) bool { after = append(after, b); return true })
		if len(before) != len(after) {
			t.Fatalf("%d batches became %d", len(before), len(after))
		}
		for i, b := range before {
			was, _, err := records.Decode(b, nil, 1<<20)
			if err != nil {
				if !bytes.Equal(after[i], b) {
					t.Fatalf("batch %d did not decode (%v) but was changed", i, err)
				}
				continue
			}
			now, _, err := records.Decode(after[i], nil, 1<<20)
			if err != nil {
				t.Fatalf("batch %d as kproxy wrote it does not decode: %v", i, err)
			}
			if len(now.Records) != len(was.Records) {
				t.Fatalf("batch %d: %d records became %d", i, len(was.Records), len(now.Records))
			}
		}
	})
}

// producedRecords is the records section of a Produce frame's one
// partition.
func producedRecords(t *testing.T, frame []byte) []byte {
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
		t.Fatalf("the rewritten frame does not decode: %v", err)
	}
	return req.Topics[0].Partitions[0].Records
}
