package records

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kproxy/kproxy/internal/batchtest"
)

// noLimit is a limit no test input reaches.
const noLimit = 1 << 30

// Every codec a producer may use comes back to the bytes it was given,
// appended to what dst held.
func TestInflateRoundTrip(t *testing.T) {
	raw := batchtest.SampleRecords()
	for _, tc := range []struct {
		name  string
		codec int
		data  []byte
		want  []byte
	}{
		{"gzip", batchtest.Gzip, batchtest.Gzipped(t, raw), raw},
		{"snappy raw", batchtest.Snappy, batchtest.SnappyRaw(raw), raw},
		{"snappy xerial one block", batchtest.Snappy, batchtest.Xerial(raw, 32<<10), raw},
		{"snappy xerial many blocks", batchtest.Snappy, batchtest.Xerial(raw, 1000), raw},
		{"snappy xerial no blocks", batchtest.Snappy, batchtest.Xerial(nil, 1), nil},
		{"lz4", batchtest.LZ4, batchtest.LZ4Framed(t, raw), raw},
		{"zstd", batchtest.Zstd, batchtest.ZstdAll(t, raw), raw},
		{"zstd stream", batchtest.Zstd, batchtest.ZstdStream(t, raw), raw},
	} {
		for _, dst := range [][]byte{nil, []byte("kept")} {
			got, err := Inflate(bytes.Clone(dst), tc.codec, tc.data, noLimit)
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			if want := append(bytes.Clone(dst), tc.want...); !bytes.Equal(got, want) {
				t.Errorf("%s after %q: %d bytes back, want %d", tc.name, dst, len(got), len(want))
			}
		}
	}
}

// A small batch that inflates past the limit stops at the limit: the
// bytes up to it and ErrOverBudget, never more; one that inflates to
// exactly the limit is read whole.
func TestInflateBomb(t *testing.T) {
	const limit = 256 << 10
	raw := bytes.Repeat([]byte("bomb"), 1<<20) // 4 MiB
	for _, tc := range []struct {
		name     string
		codec    int
		compress func([]byte) []byte
	}{
		{"gzip", batchtest.Gzip, func(b []byte) []byte { return batchtest.Gzipped(t, b) }},
		{"snappy raw", batchtest.Snappy, batchtest.SnappyRaw},
		{"snappy xerial", batchtest.Snappy, func(b []byte) []byte { return batchtest.Xerial(b, 64<<10) }},
		{"lz4", batchtest.LZ4, func(b []byte) []byte { return batchtest.LZ4Framed(t, b) }},
		{"zstd", batchtest.Zstd, func(b []byte) []byte { return batchtest.ZstdAll(t, b) }},
		{"zstd stream", batchtest.Zstd, func(b []byte) []byte { return batchtest.ZstdStream(t, b) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bomb := tc.compress(raw)
			if len(bomb) > 1<<20 {
				t.Fatalf("bomb is %d bytes; the test wants a small input", len(bomb))
			}
			out, err := Inflate(nil, tc.codec, bomb, limit)
			if !errors.Is(err, ErrOverBudget) || len(out) > limit || !bytes.Equal(out, raw[:len(out)]) {
				t.Errorf("%d bytes, err %v, want at most %d bytes of the input and ErrOverBudget", len(out), err, limit)
			}
			if tc.name != "snappy raw" && len(out) < limit/2 {
				// Streams (and xerial's blocks) give what fits.
				t.Errorf("only %d bytes of %d read before the limit", len(out), limit)
			}
			out, err = Inflate(nil, tc.codec, tc.compress(raw[:limit]), limit)
			if err != nil || len(out) != limit {
				t.Errorf("at the limit: %d bytes, %v", len(out), err)
			}
		})
	}
}

// A zstd frame that asks for a window past maxZstdWindow is not read: the
// streaming decoder would allocate that window before its first byte.
func TestInflateZstdWindowBound(t *testing.T) {
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(2*maxZstdWindow))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bytes.Repeat(batchtest.SampleRecords(), 100)) // over one block, or the frame states its size instead
	w.Close()
	if out, err := Inflate(nil, batchtest.Zstd, buf.Bytes(), noLimit); !errors.Is(err, zstd.ErrWindowSizeExceeded) {
		t.Fatalf("%d bytes, err %v, want ErrWindowSizeExceeded", len(out), err)
	}
}

// Damaged input gives an error, never a panic or garbage.
func TestInflateCorrupt(t *testing.T) {
	raw := batchtest.SampleRecords()
	valid := map[int][]byte{
		batchtest.Gzip: batchtest.Gzipped(t, raw), batchtest.Snappy: batchtest.SnappyRaw(raw), batchtest.LZ4: batchtest.LZ4Framed(t, raw), batchtest.Zstd: batchtest.ZstdAll(t, raw),
	}
	for codec, data := range valid {
		for name, bad := range map[string][]byte{
			"garbage":   []byte("this is not compressed data at all......"),
			"empty":     nil,
			"truncated": data[:len(data)/2],
			"flipped":   flip(data),
		} {
			out, err := Inflate(nil, codec, bad, noLimit)
			// Empty input is an empty frame stream to lz4 and zstd.
			emptyOK := name == "empty" && (codec == batchtest.LZ4 || codec == batchtest.Zstd) && len(out) == 0
			if err == nil && !emptyOK {
				t.Errorf("codec %d %s: no error (%d bytes)", codec, name, len(out))
			}
		}
	}
	x := batchtest.Xerial(raw, 1000)
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
		if _, err := Inflate(nil, batchtest.Snappy, slices.Clip(bad), noLimit); err == nil {
			t.Errorf("xerial %s: no error", name)
		}
	}
	for _, codec := range []int{5, 6, 7} {
		if _, err := Inflate(nil, codec, raw, noLimit); err == nil {
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

// Inflations do not share a decoder: one held in the middle of its stream
// is undisturbed by others running meanwhile, from this goroutine and
// from others at once (where -race would see a shared one).
func TestInflationsHaveTheirOwnDecoders(t *testing.T) {
	raw := bytes.Repeat(batchtest.SampleRecords(), 40) // several zstd blocks
	held := zstdDecoders.Get().(*zstd.Decoder)
	defer zstdDecoders.Put(held)
	if err := held.Reset(bytes.NewReader(batchtest.ZstdStream(t, raw))); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 1000)
	if _, err := held.Read(head); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := bytes.Repeat([]byte{byte(i)}, 300<<10)
			data := batchtest.ZstdStream(t, mine)
			for range 5 {
				got, err := Inflate(nil, batchtest.Zstd, data, 1<<20)
				if err != nil || !bytes.Equal(got, mine) {
					t.Errorf("goroutine %d: %d bytes, %v", i, len(got), err)
					return
				}
			}
		}()
	}
	wg.Wait()

	rest, err := readUpTo(head, held, len(raw))
	if err != nil || !bytes.Equal(rest, raw) {
		t.Fatalf("the held stream came back with %d bytes (%v), want its own %d", len(rest), err, len(raw))
	}
}
