package records

import (
	"encoding/binary"
	"errors"
)

// Record batch (magic 2) layout: the facts kproxy reads without decoding
// records.
const (
	LengthOff  = 8  // int32, bytes after this field
	MagicOff   = 16 // int8
	AttrsOff   = 21 // int16; bits 0-2 compression
	CountOff   = 57 // int32 records_count
	HeaderSize = 61
)

// EachBatch calls fn with every whole magic-2 batch in records.
func EachBatch(records []byte, fn func(batch []byte) bool) {
	for len(records) >= HeaderSize {
		n := int(int32(binary.BigEndian.Uint32(records[LengthOff:])))
		end := LengthOff + 4 + n
		if n < HeaderSize-LengthOff-4 || end > len(records) || records[MagicOff] != 2 {
			return
		}
		if !fn(records[:end]) {
			return
		}
		records = records[end:]
	}
}

// RecordCount sums records_count over the batches, from their headers
// alone: no decompression.
func RecordCount(records []byte) int {
	total := 0
	EachBatch(records, func(b []byte) bool {
		total += max(0, int(int32(binary.BigEndian.Uint32(b[CountOff:]))))
		return true
	})
	return total
}

func CodecOf(batch []byte) int { return int(binary.BigEndian.Uint16(batch[AttrsOff:]) & 7) }

var ErrTruncated = errors.New("truncated record")

// EachHeader walks uncompressed records and calls fn for each record's
// headers with the given key; fn returns false to stop. The layout: length,
// attributes, timestamp delta, offset delta, key, value, headers; lengths
// and counts are zig-zag varints, -1 meaning null.
func EachHeader(records []byte, count int, key string, fn func(record int, value []byte) bool) error {
	r := varReader{b: records}
	for i := 0; i < count && len(r.b) > 0; i++ {
		n := r.varint()
		if r.err != nil || n < 0 || int(n) > len(r.b) {
			return ErrTruncated
		}
		rec := varReader{b: r.b[:n]}
		r.b = r.b[n:]
		rec.skip(1)  // attributes
		rec.varint() // timestamp delta
		rec.varint() // offset delta
		rec.bytes()  // key
		rec.bytes()  // value
		headers := rec.varint()
		for h := int64(0); h < headers && rec.err == nil; h++ {
			k, v := rec.bytes(), rec.bytes()
			if rec.err == nil && string(k) == key && !fn(i, v) {
				return nil
			}
		}
		if rec.err != nil {
			return rec.err
		}
	}
	return r.err
}

type varReader struct {
	b   []byte
	err error
}

func (r *varReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = ErrTruncated
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *varReader) skip(n int) {
	if r.err == nil && len(r.b) < n {
		r.err = ErrTruncated
	}
	if r.err == nil {
		r.b = r.b[n:]
	}
}

func (r *varReader) bytes() []byte {
	n := r.varint()
	if r.err != nil || n < 0 {
		return nil
	}
	if int(n) > len(r.b) {
		r.err = ErrTruncated
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
