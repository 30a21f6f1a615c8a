package tracing

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxDecompressed bounds what one batch may inflate to, so a hostile batch
// cannot make kproxy allocate without limit.
const maxDecompressed = 16 << 20

var errTooLarge = errors.New("decompressed batch over the 16 MiB inspection bound")

var zstdDec, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxDecompressed), zstd.WithDecoderConcurrency(1))

// xerialMagic starts snappy data framed the way the Java client writes it.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompress returns the records of a batch compressed with codec (the
// batch attributes' low bits).
func decompress(codec int, data []byte) ([]byte, error) {
	switch codec {
	case 0:
		return data, nil
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		return readBounded(zr)
	case 2:
		return unsnappy(data)
	case 3:
		return readBounded(lz4.NewReader(bytes.NewReader(data)))
	case 4:
		return zstdDec.DecodeAll(data, nil)
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

func readBounded(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if len(out) > maxDecompressed {
		return nil, errTooLarge
	}
	return out, err
}

// unsnappy decodes a raw snappy block, or xerial framing: a 16-byte header,
// then blocks each prefixed with an int32 length.
func unsnappy(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialMagic) {
		return snappyBlock(nil, data)
	}
	if len(data) < 16 {
		return nil, errTruncated
	}
	var out []byte
	for rest := data[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errTruncated
		}
		n := int(binary.BigEndian.Uint32(rest))
		if n > len(rest)-4 {
			return nil, errTruncated
		}
		var err error
		if out, err = snappyBlock(out, rest[4:4+n]); err != nil {
			return nil, err
		}
		rest = rest[4+n:]
	}
	return out, nil
}

func snappyBlock(dst, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if len(dst)+n > maxDecompressed {
		return nil, errTooLarge
	}
	out, err := s2.Decode(nil, block)
	if err != nil {
		return nil, err
	}
	return append(dst, out...), nil
}
