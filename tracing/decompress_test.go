package tracing

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sampleRecords is a records section worth compressing.
func sampleRecords() []byte {
	var recs []kmsg.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, kmsg.Record{Key: []byte("key"), Value: bytes.Repeat([]byte("payload "), 20),
			Headers: hdrs("traceparent", traceparent(spanCtx(byte(i), 1, true)))})
	}
	return encodeRecords(recs...)
}

// Every codec a producer may use comes back to the bytes it was given.
func TestDecompressRoundTrip(t *testing.T) {
	raw := sampleRecords()
	for _, tc := range []struct {
		name  string
		codec int
		data  []byte
	}{
		{"none", 0, raw},
		{"gzip", codecGzip, gzipped(t, raw)},
		{"snappy raw", codecSnappy, snappyRaw(raw)},
		{"snappy xerial one block", codecSnappy, xerial(raw, 32<<10)},
		{"snappy xerial many blocks", codecSnappy, xerial(raw, 1000)},
		{"snappy xerial no blocks", codecSnappy, xerial(nil, 1)},
		{"lz4", codecLZ4, lz4Framed(t, raw)},
		{"zstd", codecZstd, zstdAll(t, raw)},
		{"zstd stream", codecZstd, zstdStream(t, raw)},
	} {
		got, err := decompress(tc.codec, tc.data)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		want := raw
		if tc.name == "snappy xerial no blocks" {
			want = nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes back, want %d", tc.name, len(got), len(want))
		}
	}
}

// A small batch that inflates past the bound is refused, not allocated;
// one exactly at the bound still inflates.
func TestDecompressBomb(t *testing.T) {
	at := make([]byte, maxDecompressed)
	over := make([]byte, maxDecompressed+1)
	for _, tc := range []struct {
		name     string
		codec    int
		compress func([]byte) []byte
	}{
		{"gzip", codecGzip, func(b []byte) []byte { return gzipped(t, b) }},
		{"snappy raw", codecSnappy, snappyRaw},
		{"snappy xerial", codecSnappy, func(b []byte) []byte { return xerial(b, 1<<20) }},
		{"lz4", codecLZ4, func(b []byte) []byte { return lz4Framed(t, b) }},
		{"zstd", codecZstd, func(b []byte) []byte { return zstdAll(t, b) }},
		{"zstd stream", codecZstd, func(b []byte) []byte { return zstdStream(t, b) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bomb := tc.compress(over)
			if len(bomb) > 1<<20 {
				t.Fatalf("bomb is %d bytes; the test wants a small input", len(bomb))
			}
			out, err := decompress(tc.codec, bomb)
			if tc.codec == codecZstd {
				// zstd enforces the bound inside the decoder, with its own
				// error, and hands back what it decoded up to the bound.
				if !errors.Is(err, zstd.ErrDecoderSizeExceeded) || len(out) > maxDecompressed+1<<20 {
					t.Errorf("err %v, %d bytes, want ErrDecoderSizeExceeded", err, len(out))
				}
			} else if out != nil || !errors.Is(err, errTooLarge) {
				t.Errorf("%d bytes, err %v, want errTooLarge", len(out), err)
			}
			out, err = decompress(tc.codec, tc.compress(at))
			if err != nil || len(out) != maxDecompressed {
				t.Errorf("at the bound: %d bytes, %v", len(out), err)
			}
		})
	}
}

// Damaged input gives an error, never a panic or garbage.
func TestDecompressCorrupt(t *testing.T) {
	raw := sampleRecords()
	valid := map[int][]byte{
		codecGzip: gzipped(t, raw), codecSnappy: snappyRaw(raw), codecLZ4: lz4Framed(t, raw), codecZstd: zstdAll(t, raw),
	}
	for codec, data := range valid {
		for name, bad := range map[string][]byte{
			"garbage":   []byte("this is not compressed data at all......"),
			"empty":     nil,
			"truncated": data[:len(data)/2],
			"flipped":   flip(data),
		} {
			out, err := decompress(codec, bad)
			// Empty input is an empty frame stream to lz4 and zstd.
			emptyOK := name == "empty" && (codec == codecLZ4 || codec == codecZstd) && len(out) == 0
			if err == nil && !emptyOK {
				t.Errorf("codec %d %s: no error (%d bytes)", codec, name, len(out))
			}
		}
	}
	x := xerial(raw, 1000)
	for name, bad := range map[string][]byte{
		"header only magic":   x[:8],
		"length cut":          x[:18],
		"block cut":           x[:30],
		"length past end":     append(bytes.Clone(x[:16]), 0x7f, 0xff, 0xff, 0xff, 1),
		"length one past end": append(bytes.Clone(x[:16]), 0, 0, 0, 3, 0, 0),
		"huge length":         append(bytes.Clone(x[:16]), 0xff, 0xff, 0xff, 0xff, 1),
		"bad block":           append(bytes.Clone(x[:16]), 0, 0, 0, 3, 0xff, 0xff, 0xff),
	} {
		// Clipped: reading past len must not find spare capacity.
		if _, err := decompress(codecSnappy, slices.Clip(bad)); err == nil {
			t.Errorf("xerial %s: no error", name)
		}
	}
	for _, codec := range []int{5, 6, 7} {
		if _, err := decompress(codec, raw); err == nil {
			t.Errorf("codec %d accepted", codec)
		}
	}
}

// flip returns data with bytes in its middle inverted.
func flip(data []byte) []byte {
	b := bytes.Clone(data)
	for i := len(b) / 3; i < len(b)/3+8 && i < len(b); i++ {
		b[i] ^= 0xff
	}
	return b
}
