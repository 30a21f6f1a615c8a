package tracing

import (
	"encoding/binary"
	"errors"
)

// Record batch (magic 2) layout: the facts kproxy reads without decoding
// records.
const (
	batchLengthOff  = 8  // int32, bytes after this field
	batchMagicOff   = 16 // int8
	batchAttrsOff   = 21 // int16; bits 0-2 compression
	batchCountOff   = 57 // int32 records_count
	batchHeaderSize = 61
)

// eachBatch calls fn with every whole magic-2 batch in records.
func eachBatch(records []byte, fn func(batch []byte) bool) {
	for len(records) >= batchHeaderSize {
		n := int(int32(binary.BigEndian.Uint32(records[batchLengthOff:])))
		end := batchLengthOff + 4 + n
		if n < batchHeaderSize-batchLengthOff-4 || end > len(records) || records[batchMagicOff] != 2 {
			return
		}
		if !fn(records[:end]) {
			return
		}
		records = records[end:]
	}
}

// batchRecordCount sums records_count over the batches, from their headers
// alone: no decompression.
func batchRecordCount(records []byte) int {
	total := 0
	eachBatch(records, func(b []byte) bool {
		total += max(0, int(int32(binary.BigEndian.Uint32(b[batchCountOff:]))))
		return true
	})
	return total
}

func compression(batch []byte) int { return int(binary.BigEndian.Uint16(batch[batchAttrsOff:]) & 7) }

var errTruncated = errors.New("truncated record")

// eachHeader walks uncompressed records and calls fn for each record's
// headers with the given key; fn returns false to stop. The layout: length,
// attributes, timestamp delta, offset delta, key, value, headers; lengths
// and counts are zig-zag varints, -1 meaning null.
func eachHeader(records []byte, count int, key string, fn func(record int, value []byte) bool) error {
	r := varReader{b: records}
	for i := 0; i < count && len(r.b) > 0; i++ {
		n := r.varint()
		if r.err != nil || n < 0 || int(n) > len(r.b) {
			return errTruncated
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
		r.err = errTruncated
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *varReader) skip(n int) {
	if r.err == nil && len(r.b) < n {
		r.err = errTruncated
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
		r.err = errTruncated
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
