package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// ErrOverBudget says a batch inflates to more than the request had left;
// what was inflated up to the budget is still returned.
var ErrOverBudget = errors.New("batch inflates past the request's max_decompressed_bytes")

// xerialMagic starts snappy data framed the way the Java client writes it.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// inflate appends to dst the records of a batch compressed with codec (the
// batch attributes' low bits), at most limit bytes of them. The decoders
// stream: they stop as soon as limit bytes are out, so a batch that would
// inflate to gigabytes costs no more than limit (plus the block the
// decoder was in). Past limit it returns what it has and ErrOverBudget.
func Inflate(dst []byte, codec int, data []byte, limit int) ([]byte, error) {
	switch codec {
	case 1:
		zr := gzipDecoders.Get().(*gzip.Reader)
		defer gzipDecoders.Put(zr)
		if err := zr.Reset(bytes.NewReader(data)); err != nil {
			return dst, err
		}
		defer zr.Reset(bytes.NewReader(nil)) // keep no hold on the frame
		return readUpTo(dst, zr, limit)
	case 2:
		return unsnappy(dst, data, limit)
	case 3:
		lr := lz4Decoders.Get().(*lz4.Reader)
		defer lz4Decoders.Put(lr)
		lr.Reset(bytes.NewReader(data))
		defer lr.Reset(nil)
		return readUpTo(dst, lr, limit)
	case 4:
		zd := zstdDecoders.Get().(*zstd.Decoder)
		defer zstdDecoders.Put(zd)
		if err := zd.Reset(bytes.NewReader(data)); err != nil {
			return dst, err
		}
		defer zd.Reset(nil)
		return readUpTo(dst, zd, limit)
	}
	return dst, fmt.Errorf("unknown compression codec %d", codec)
}

// readUpTo appends what r gives to dst until EOF, or until more than limit
// bytes would be appended: then it stops at limit with ErrOverBudget.
// It never asks r for more than one byte past limit.
func readUpTo(dst []byte, r io.Reader, limit int) ([]byte, error) {
	end := len(dst) + limit
	for {
		if len(dst) == cap(dst) {
			// Grow by doubling, but never past what limit allows.
			dst = slices.Grow(dst, min(max(cap(dst), 4<<10), end+1-len(dst)))
		}
		n, err := r.Read(dst[len(dst):min(cap(dst), end+1)])
		dst = dst[:len(dst)+n]
		if len(dst) > end {
			return dst[:end], ErrOverBudget
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// unsnappy decodes a raw snappy block, or xerial framing: a 16-byte header,
// then blocks each prefixed with an int32 length. A snappy block states
// its decoded length first, so a block past the limit is never decoded.
func unsnappy(dst, data []byte, limit int) ([]byte, error) {
	end := len(dst) + limit
	if !bytes.HasPrefix(data, xerialMagic) {
		return snappyBlock(dst, data, end)
	}
	if len(data) < 16 {
		return dst, ErrTruncated
	}
	for rest := data[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return dst, ErrTruncated
		}
		n := int(binary.BigEndian.Uint32(rest))
		if n > len(rest)-4 {
			return dst, ErrTruncated
		}
		var err error
		if dst, err = snappyBlock(dst, rest[4:4+n], end); err != nil {
			return dst, err
		}
		rest = rest[4+n:]
	}
	return dst, nil
}

// snappyBlock appends block decoded to dst, unless that would take dst
// past end.
func snappyBlock(dst, block []byte, end int) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return dst, err
	}
	if n > end-len(dst) {
		return dst, ErrOverBudget
	}
	dst = slices.Grow(dst, n)
	if _, err := s2.Decode(dst[len(dst):len(dst)+n], block); err != nil {
		return dst, err
	}
	return dst[:len(dst)+n], nil
}
