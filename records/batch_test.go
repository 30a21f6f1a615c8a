package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/batchtest"
)

// codecCases are batches as producers write them: every codec, snappy
// both raw (librdkafka, franz-go) and xerial-framed (the Java client),
// zstd with and without a declared content size.
func codecCases(t *testing.T, recs []kmsg.Record) map[string][]byte {
	raw := batchtest.EncodeRecords(recs...)
	n := len(recs)
	return map[string][]byte{
		"none":          batchtest.MakeBatch(0, n, raw),
		"gzip":          batchtest.MakeBatch(batchtest.Gzip, n, batchtest.Gzipped(t, raw)),
		"snappy-raw":    batchtest.MakeBatch(batchtest.Snappy, n, batchtest.SnappyRaw(raw)),
		"snappy-xerial": batchtest.MakeBatch(batchtest.Snappy, n, batchtest.Xerial(raw, 100)),
		"lz4":           batchtest.MakeBatch(batchtest.LZ4, n, batchtest.LZ4Framed(t, raw)),
		"zstd":          batchtest.MakeBatch(batchtest.Zstd, n, batchtest.ZstdAll(t, raw)),
		"zstd-stream":   batchtest.MakeBatch(batchtest.Zstd, n, batchtest.ZstdStream(t, raw)),
	}
}

func testRecords() []kmsg.Record {
	var recs []kmsg.Record
	for i := range 40 {
		r := kmsg.Record{Key: []byte{byte(i)}, Value: bytes.Repeat([]byte("value "), i), TimestampDelta64: int64(i * 3)}
		switch i % 4 {
		case 1:
			r.Key = nil // a null key stays null
		case 2:
			r.Headers = batchtest.Headers("a", "1", "b", "")
		case 3:
			r.Value = nil
		}
		recs = append(recs, r)
	}
	return recs
}

// A batch decoded, given a header on every record, and encoded again:
// kmsg reads the result, its CRC and length hold, its codec (and snappy
// framing) is the one it came with, every header field but the length and
// crc is unchanged, and each record is the one sent plus the header.
func TestBatchRewriteEveryCodec(t *testing.T) {
	recs := testRecords()
	for name, in := range codecCases(t, recs) {
		t.Run(name, func(t *testing.T) {
			// An idempotent producer's batch: its ids must survive.
			setProducer(in, 7001, 3, 42)
			b, _, err := Decode(in, nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			for i := range b.Records {
				b.Records[i].Headers = append(b.Records[i].Headers, kmsg.Header{Key: "traceparent", Value: []byte("00-x")})
			}
			out, _, err := b.Encode(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got kmsg.RecordBatch
			if err := got.ReadFrom(out); err != nil {
				t.Fatal(err)
			}
			if int(got.Length)+12 != len(out) {
				t.Fatalf("batch_length %d for %d bytes", got.Length, len(out))
			}
			if crc := crc32.Checksum(out[21:], castagnoli); uint32(got.CRC) != crc {
				t.Fatalf("crc %08x, computed %08x", uint32(got.CRC), crc)
			}
			var want kmsg.RecordBatch
			want.ReadFrom(in)
			for _, f := range [][2]int64{
				{got.FirstOffset, want.FirstOffset}, {int64(got.PartitionLeaderEpoch), int64(want.PartitionLeaderEpoch)},
				{int64(got.Attributes), int64(want.Attributes)}, {int64(got.LastOffsetDelta), int64(want.LastOffsetDelta)},
				{got.FirstTimestamp, want.FirstTimestamp}, {got.MaxTimestamp, want.MaxTimestamp},
				{got.ProducerID, want.ProducerID}, {int64(got.ProducerEpoch), int64(want.ProducerEpoch)},
				{int64(got.FirstSequence), int64(want.FirstSequence)}, {int64(got.NumRecords), int64(want.NumRecords)},
			} {
				if f[0] != f[1] {
					t.Fatalf("header changed: %+v, was %+v", got, want)
				}
			}
			if name == "snappy-xerial" && !isXerial(got.Records) || name == "snappy-raw" && isXerial(got.Records) {
				t.Fatalf("snappy framing changed")
			}
			again, _, err := Decode(out, nil, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range again.Records {
				w := recs[i]
				w.OffsetDelta = int32(i)
				w.Headers = append(slices.Clone(w.Headers), kmsg.Header{Key: "traceparent", Value: []byte("00-x")})
				if !sameRecord(r, w) {
					t.Fatalf("record %d: %+v, want %+v", i, r, w)
				}
			}
		})
	}
}

// setProducer writes producer id, epoch and base sequence into a batch
// and fixes its crc.
func setProducer(batch []byte, id int64, epoch int16, seq int32) {
	binary.BigEndian.PutUint64(batch[43:], uint64(id))
	binary.BigEndian.PutUint16(batch[51:], uint16(epoch))
	binary.BigEndian.PutUint32(batch[53:], uint32(seq))
	binary.BigEndian.PutUint32(batch[crcOff:], crc32.Checksum(batch[crcFrom:], castagnoli))
}

func sameRecord(a, b kmsg.Record) bool {
	if a.Attributes != b.Attributes || a.TimestampDelta64 != b.TimestampDelta64 || a.OffsetDelta != b.OffsetDelta ||
		!sameBytes(a.Key, b.Key) || !sameBytes(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !sameBytes(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// sameBytes tells null from empty, as the wire does.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// A batch kproxy must not change is refused, never "fixed": a control
// batch, one whose CRC fails, one cut short, one whose count lies.
func TestDecodeRefuses(t *testing.T) {
	good := batchtest.PlainBatch(kmsg.Record{Value: []byte("v")}, kmsg.Record{Value: []byte("w")})
	control := slices.Clone(good)
	control[22] |= 0x20
	setProducer(control, -1, -1, -1) // recomputes the crc
	badCRC := slices.Clone(good)
	badCRC[len(badCRC)-1] ^= 1
	lying := batchtest.MakeBatch(0, 3, batchtest.EncodeRecords(kmsg.Record{Value: []byte("v")}))
	for name, tc := range map[string]struct {
		batch []byte
		want  error
	}{
		"control": {control, ErrControl}, "crc": {badCRC, ErrCRC}, "short": {good[:len(good)-1], ErrNotBatch},
		"count": {lying, ErrRecords},
	} {
		if _, _, err := Decode(tc.batch, nil, 1<<20); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// Fuzzed batches never panic the decoder, and whatever it accepts
// encodes to a batch that passes its own CRC and decodes again to the
// same records.
func FuzzBatchRewrite(f *testing.F) {
	recs := testRecords()[:5]
	f.Add(batchtest.PlainBatch(recs...), false)
	f.Add(batchtest.MakeBatch(batchtest.Snappy, len(recs), batchtest.Xerial(batchtest.EncodeRecords(recs...), 16)), true)
	f.Add(batchtest.MakeBatch(batchtest.Snappy, len(recs), batchtest.SnappyRaw(batchtest.EncodeRecords(recs...))), true)
	f.Add(batchtest.MakeBatch(batchtest.Zstd, len(recs), batchtest.ZstdAll(f, batchtest.EncodeRecords(recs...))), true)
	f.Add(batchtest.MakeBatch(batchtest.LZ4, len(recs), batchtest.LZ4Framed(f, batchtest.EncodeRecords(recs...))), true)
	f.Add(batchtest.MakeBatch(batchtest.Gzip, len(recs), batchtest.Gzipped(f, batchtest.EncodeRecords(recs...))), true)
	f.Fuzz(func(t *testing.T, in []byte, fix bool) {
		if fix && len(in) >= HeaderSize {
			// Length and crc made right, so the fuzzer reaches the
			// records and the codecs rather than the crc check.
			binary.BigEndian.PutUint32(in[LengthOff:], uint32(len(in)-12))
			in[MagicOff] = 2
			binary.BigEndian.PutUint32(in[crcOff:], crc32.Checksum(in[crcFrom:], castagnoli))
		}
		b, _, err := Decode(in, nil, 1<<16)
		if err != nil {
			return
		}
		out, _, err := b.Encode(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := Decode(out, nil, 1<<20)
		if err != nil {
			t.Fatalf("kproxy's own batch does not decode: %v", err)
		}
		if len(again.Records) != len(b.Records) {
			t.Fatalf("%d records, encoded %d", len(again.Records), len(b.Records))
		}
	})
}
