package records

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// crcOff is where a batch's crc is, and crcFrom where the bytes it covers
// begin (attributes to the end).
const (
	crcOff  = 17
	crcFrom = 21
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is one batch decoded for a change: its header as sent and its
// records. Encode writes it back.
type Batch struct {
	// Header is the batch's header; its Records field holds the records
	// section as sent (compressed when the codec is not none).
	Header  kmsg.RecordBatch
	Records []kmsg.Record
	// xerial is set when the batch's snappy data was xerial-framed (the
	// Java client's): Encode frames it the same way.
	xerial bool
}

// Codec is the batch's compression codec (0 none, 1 gzip, 2 snappy, 3
// lz4, 4 zstd).
func (b *Batch) Codec() int { return int(b.Header.Attributes & 7) }

// Decode reads raw, one whole batch as EachBatch yields it, for a change.
// Its CRC must hold and it must not be a control batch. Compressed
// records are inflated into scratch, at most limit bytes; the records
// returned point into raw or scratch, so both must outlive them. It
// returns scratch, grown, for reuse.
func Decode(raw, scratch []byte, limit int) (Batch, []byte, error) {
	var b Batch
	if len(raw) < HeaderSize || raw[MagicOff] != 2 || int(int32(binary.BigEndian.Uint32(raw[LengthOff:])))+12 != len(raw) {
		return b, scratch, ErrNotBatch
	}
	if crc32.Checksum(raw[crcFrom:], castagnoli) != binary.BigEndian.Uint32(raw[crcOff:]) {
		return b, scratch, ErrCRC
	}
	if err := b.Header.ReadFrom(raw); err != nil {
		return b, scratch, fmt.Errorf("%w: %v", ErrNotBatch, err)
	}
	if b.Header.Attributes&0x20 != 0 {
		return b, scratch, ErrControl
	}
	if b.Header.NumRecords < 0 {
		return b, scratch, ErrRecords
	}
	body := b.Header.Records
	if c := b.Codec(); c != 0 {
		b.xerial = c == 2 && isXerial(body)
		var err error
		if scratch, err = Inflate(scratch[:0], c, body, limit); err != nil {
			return b, scratch, err
		}
		body = scratch
	}
	recs, err := decodeRecords(body, int(b.Header.NumRecords))
	if err != nil {
		return b, scratch, err
	}
	b.Records = recs
	return b, scratch, nil
}

// Records reads count records from an uncompressed records section (a
// batch's body after its header, inflated when compressed), which they
// must fill exactly: for readers that judge records without changing
// them. The records point into body.
func Records(body []byte, count int) ([]kmsg.Record, error) { return decodeRecords(body, count) }

// EachRecord reads count records from an uncompressed records section
// one at a time into the same Record, so that judging a batch costs one
// record's memory whatever it holds; fn returns false to stop. The
// section must hold exactly count records. The record (its key, value
// and header slices) is valid only during fn.
func EachRecord(body []byte, count int, fn func(i int, r *kmsg.Record) bool) error {
	if count < 0 || count > len(body)/7 {
		return ErrRecords
	}
	var rec kmsg.Record
	for i := 0; i < count; i++ {
		n, k := binary.Varint(body)
		if k <= 0 || n < 0 || int64(len(body)-k) < n {
			return ErrRecords
		}
		one := body[:k+int(n)]
		headers := rec.Headers[:0]
		rec = kmsg.Record{Headers: headers}
		if err := rec.ReadFrom(one); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrRecords, i, err)
		}
		if !fn(i, &rec) {
			return nil
		}
		body = body[len(one):]
	}
	if len(body) != 0 {
		return ErrRecords
	}
	return nil
}

// decodeRecords reads count records from an uncompressed records
// section, which they must fill exactly.
func decodeRecords(body []byte, count int) ([]kmsg.Record, error) {
	if count < 0 || count > len(body)/7 { // a record takes at least 7 bytes
		return nil, ErrRecords
	}
	recs := make([]kmsg.Record, count)
	for i := range recs {
		n, k := binary.Varint(body)
		if k <= 0 || n < 0 || int64(len(body)-k) < n {
			return nil, ErrRecords
		}
		one := body[:k+int(n)]
		if err := recs[i].ReadFrom(one); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrRecords, i, err)
		}
		body = body[len(one):]
	}
	if len(body) != 0 {
		return nil, ErrRecords
	}
	return recs, nil
}

// Encode appends the batch to dst: its records with their own offset and
// timestamp deltas, compressed with the batch's codec (xerial framing
// kept), then the header with batch_length and crc computed and every
// other field (offsets, producer id, epoch, sequence, timestamps,
// attributes, count) as decoded. raw is scratch for the uncompressed
// records section; it returns dst and raw, grown, for reuse.
func (b *Batch) Encode(dst, raw []byte) ([]byte, []byte, error) {
	raw = AppendRecords(raw[:0], b.Records)
	section := raw
	start := len(dst)
	h := b.Header
	h.NumRecords = int32(len(b.Records))
	h.Records = nil
	dst = h.AppendTo(dst) // the header; length and crc filled in below
	if c := b.Codec(); c != 0 {
		var err error
		if dst, err = Deflate(dst, c, section, b.xerial); err != nil {
			return dst[:start], raw, err
		}
	} else {
		dst = append(dst, section...)
	}
	batch := dst[start:]
	binary.BigEndian.PutUint32(batch[LengthOff:], uint32(len(batch)-12))
	binary.BigEndian.PutUint32(batch[crcOff:], crc32.Checksum(batch[crcFrom:], castagnoli))
	return dst, raw, nil
}

// AppendRecords appends recs as a records section: each record's length
// computed, its other fields as they are.
func AppendRecords(dst []byte, recs []kmsg.Record) []byte {
	for i := range recs {
		r := recs[i]
		r.Length = 0
		at := len(dst)
		dst = r.AppendTo(dst) // a one-byte zero length, then the body
		body := len(dst) - at - 1
		var lb [binary.MaxVarintLen32]byte
		k := binary.PutVarint(lb[:], int64(body))
		if k > 1 { // make room for the longer length
			dst = append(dst, lb[:k-1]...)
			copy(dst[at+k:], dst[at+1:at+1+body])
		}
		copy(dst[at:], lb[:k])
	}
	return dst
}
