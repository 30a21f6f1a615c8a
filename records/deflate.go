package records

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// xerialBlock is how much input each xerial snappy block holds, as the
// Java client writes them.
const xerialBlock = 32 << 10

// xerialHeader is the xerial framing's header: magic, version 1,
// compatible version 1.
var xerialHeader = append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)

func isXerial(data []byte) bool { return bytes.HasPrefix(data, xerialMagic) }

// Encoders are pooled like the decoders: one per encoding at a time, so
// concurrent rewrites never wait on each other's.
var (
	gzipEncoders = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Encoders  = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// 64 KiB blocks, as the Java client writes: the default 4 MiB
		// would be held by every pooled writer.
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			panic(err)
		}
		return w
	}}
	zstdEncoders = sync.Pool{New: func() any {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
		if err != nil {
			panic(err) // the options are constants
		}
		return e
	}}
)

// Deflate appends raw compressed with codec to dst: gzip, snappy (one
// raw block, or xerial framing when xerial is set), the LZ4 frame
// format, or one zstd frame.
func Deflate(dst []byte, codec int, raw []byte, xerial bool) ([]byte, error) {
	switch codec {
	case 1:
		w := gzipEncoders.Get().(*gzip.Writer)
		defer gzipEncoders.Put(w)
		return stream(dst, raw, func(buf *bytes.Buffer) streamer { w.Reset(buf); return w })
	case 2:
		if !xerial {
			return appendSnappy(dst, raw), nil
		}
		return appendXerial(dst, raw), nil
	case 3:
		w := lz4Encoders.Get().(*lz4.Writer)
		defer lz4Encoders.Put(w)
		return stream(dst, raw, func(buf *bytes.Buffer) streamer { w.Reset(buf); return w })
	case 4:
		e := zstdEncoders.Get().(*zstd.Encoder)
		defer zstdEncoders.Put(e)
		return e.EncodeAll(raw, dst), nil
	}
	return dst, fmt.Errorf("unknown compression codec %d", codec)
}

// streamer is a compressing writer that finishes its frame on Close.
type streamer interface {
	Write([]byte) (int, error)
	Close() error
}

// stream compresses raw through the writer reset onto a buffer over dst.
func stream(dst, raw []byte, reset func(*bytes.Buffer) streamer) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	w := reset(buf)
	if _, err := w.Write(raw); err != nil {
		return dst, err
	}
	if err := w.Close(); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// appendXerial appends raw in xerial framing: the header, then blocks of
// at most xerialBlock input bytes, each an int32 length and a snappy
// block.
func appendXerial(dst, raw []byte) []byte {
	dst = append(dst, xerialHeader...)
	for len(raw) > 0 {
		n := min(xerialBlock, len(raw))
		at := len(dst)
		dst = appendSnappy(append(dst, 0, 0, 0, 0), raw[:n])
		binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
		raw = raw[n:]
	}
	return dst
}

// appendSnappy appends raw as one snappy block.
func appendSnappy(dst, raw []byte) []byte {
	n := s2.MaxEncodedLen(len(raw))
	dst = slices.Grow(dst, n)
	block := s2.EncodeSnappy(dst[len(dst):len(dst)+n], raw)
	return dst[:len(dst)+len(block)]
}
