// Package batchtest builds magic-2 record batches the way producers write
// them, with the codecs' own writers (not kproxy's), so kproxy's readers
// and rewriters are checked against the wire format. Tests only.
package batchtest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Codec numbers as in the batch attributes.
const (
	Gzip   = 1
	Snappy = 2
	LZ4    = 3
	Zstd   = 4
)

// headerSize is a batch's fixed part, up to and including records_count.
const headerSize = 61

// EncodeRecords writes records as a batch's records section, filling in
// the offset deltas and the varint lengths kmsg leaves to the caller.
func EncodeRecords(recs ...kmsg.Record) []byte {
	var out []byte
	for i := range recs {
		r := recs[i]
		r.OffsetDelta = int32(i)
		r.Length = 0
		body := r.AppendTo(nil)[1:] // drop the one-byte placeholder length
		out = binary.AppendVarint(out, int64(len(body)))
		out = append(out, body...)
	}
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MakeBatch wraps a records section, already compressed for codec, in a
// batch header that claims count records.
func MakeBatch(codec int16, count int, records []byte) []byte {
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: codec, LastOffsetDelta: int32(count - 1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(count), Records: records,
		Length: int32(headerSize - 12 + len(records)),
	}
	raw := b.AppendTo(nil)
	b.CRC = int32(crc32.Checksum(raw[21:], castagnoli))
	return b.AppendTo(nil)
}

// PlainBatch is an uncompressed batch of recs.
func PlainBatch(recs ...kmsg.Record) []byte { return MakeBatch(0, len(recs), EncodeRecords(recs...)) }

// Headers builds record headers from key/value pairs.
func Headers(kv ...string) []kmsg.Header {
	var h []kmsg.Header
	for i := 0; i+1 < len(kv); i += 2 {
		h = append(h, kmsg.Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return h
}

// Gzipped is raw through gzip's writer.
func Gzipped(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// SnappyRaw is one snappy block, as librdkafka and franz-go write it.
func SnappyRaw(raw []byte) []byte { return s2.EncodeSnappy(nil, raw) }

// Xerial frames raw the way the Java client does: the 8-byte magic,
// version 1, compatible version 1, then int32-length-prefixed snappy blocks
// of at most blockSize input bytes each.
func Xerial(raw []byte, blockSize int) []byte {
	out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for len(raw) > 0 {
		n := min(blockSize, len(raw))
		block := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		raw = raw[n:]
	}
	return out
}

// LZ4Framed is raw in the LZ4 frame format.
func LZ4Framed(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ZstdAll is a single zstd frame that declares its content size.
func ZstdAll(t testing.TB, raw []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(raw, nil)
}

// ZstdStream is written through the streaming encoder, as the Java client
// does: the frame does not declare its content size.
func ZstdStream(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Concat joins batches into one records field.
func Concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// Traceparent is a W3C traceparent value whose trace id ends in b.
func Traceparent(b byte) string {
	return "00-a1020304050607080910111213141" + hex2(b) + "-b102030405060701-01"
}

func hex2(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}

// TracedRecord is a record carrying traceparent tp among other headers.
func TracedRecord(tp string) kmsg.Record {
	return kmsg.Record{Key: []byte("k"), Value: []byte("v"),
		Headers: Headers("app", "x", "traceparent", tp, "tracestate", "vendor=1")}
}

// SampleRecords is a records section worth compressing: 50 records with
// repetitive values, each with a traceparent header.
func SampleRecords() []byte {
	var recs []kmsg.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, kmsg.Record{Key: []byte("key"), Value: bytes.Repeat([]byte("payload "), 20),
			Headers: Headers("traceparent", Traceparent(byte(i)))})
	}
	return EncodeRecords(recs...)
}
