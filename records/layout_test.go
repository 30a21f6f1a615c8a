package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/batchtest"
)

// The batch the helpers build has the layout the wire reference gives, so
// the other tests exercise real offsets.
func TestBatchLayout(t *testing.T) {
	recs := batchtest.EncodeRecords(kmsg.Record{Value: []byte("v")})
	b := batchtest.PlainBatch(kmsg.Record{Value: []byte("v")})
	if len(b) != HeaderSize+len(recs) {
		t.Fatalf("batch %d bytes, want %d", len(b), HeaderSize+len(recs))
	}
	if b[MagicOff] != 2 || binary.BigEndian.Uint32(b[CountOff:]) != 1 || !bytes.Equal(b[HeaderSize:], recs) {
		t.Fatalf("batch header misplaced: % x", b[:HeaderSize])
	}
	// kmsg must read it back the same, CRC included.
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil || rb.NumRecords != 1 || int(rb.Length) != len(b)-12 {
		t.Fatalf("kmsg reads %+v, %v", rb, err)
	}
}

// records_count comes from the headers alone, summed over batches; a
// compressed batch counts without being inflated.
func TestBatchRecordCount(t *testing.T) {
	three := batchtest.PlainBatch(kmsg.Record{Value: []byte("a")}, kmsg.Record{Key: []byte("k")}, kmsg.Record{})
	compressed := batchtest.MakeBatch(batchtest.Gzip, 5, []byte("not really gzip, never read"))
	for _, tc := range []struct {
		name    string
		records []byte
		want    int
	}{
		{"empty", nil, 0},
		{"one batch", three, 3},
		{"compressed", compressed, 5},
		{"concatenated", batchtest.Concat(three, compressed, three), 11},
		{"truncated second", batchtest.Concat(three, compressed[:40]), 3},
		{"truncated last byte", batchtest.Concat(three, compressed[:len(compressed)-1]), 3},
		{"short header", three[:HeaderSize-1], 0},
	} {
		if got := RecordCount(tc.records); got != tc.want {
			t.Errorf("%s: %d records, want %d", tc.name, got, tc.want)
		}
	}
}

// EachBatch yields every whole batch and stops, without panicking, at
// anything that is not one.
func TestEachBatch(t *testing.T) {
	a := batchtest.PlainBatch(kmsg.Record{Value: []byte("a")})
	b := batchtest.PlainBatch(kmsg.Record{Value: []byte("bb")}, kmsg.Record{Value: []byte("cc")})
	c := batchtest.MakeBatch(batchtest.Zstd, 1, []byte{1, 2, 3})
	all := batchtest.Concat(a, b, c)

	var got [][]byte
	EachBatch(all, func(batch []byte) bool { got = append(got, batch); return true })
	if len(got) != 3 || !bytes.Equal(got[0], a) || !bytes.Equal(got[1], b) || !bytes.Equal(got[2], c) {
		t.Fatalf("EachBatch split %d batches, want a, b, c", len(got))
	}

	n := 0
	EachBatch(all, func([]byte) bool { n++; return false })
	if n != 1 {
		t.Errorf("fn returning false: %d calls, want 1", n)
	}

	// Every truncation of the input yields only the whole batches before it.
	for cut := 0; cut < len(all); cut++ {
		n := 0
		EachBatch(all[:cut], func(batch []byte) bool {
			if len(batch) < HeaderSize {
				t.Fatalf("cut %d: yielded %d-byte batch", cut, len(batch))
			}
			n++
			return true
		})
		want := 0
		for _, end := range []int{len(a), len(a) + len(b)} {
			if cut >= end {
				want++
			}
		}
		if n != want {
			t.Fatalf("cut %d: %d batches, want %d", cut, n, want)
		}
	}

	// Corrupt headers: wrong magic, a length below the header, a length
	// past the input, a negative length.
	for name, edit := range map[string]func([]byte){
		"magic 1":          func(b []byte) { b[MagicOff] = 1 },
		"length too small": func(b []byte) { binary.BigEndian.PutUint32(b[LengthOff:], 10) },
		"length too big":   func(b []byte) { binary.BigEndian.PutUint32(b[LengthOff:], 1<<30) },
		"negative length":  func(b []byte) { binary.BigEndian.PutUint32(b[LengthOff:], 0xfffffff0) },
	} {
		bad := bytes.Clone(a)
		edit(bad)
		n := 0
		EachBatch(batchtest.Concat(bad, b), func([]byte) bool { n++; return true })
		if n != 0 {
			t.Errorf("%s: %d batches yielded", name, n)
		}
	}
}

// EachHeader finds the values of one header key across records with and
// without headers, null keys and null values.
func TestEachHeader(t *testing.T) {
	sc := batchtest.Traceparent(1)
	recs := []kmsg.Record{
		{Key: nil, Value: nil},     // 0: no headers, null key and value
		batchtest.TracedRecord(sc), // 1
		{Key: []byte("k"), Value: nil, Headers: batchtest.Headers("a", "1")},                                                                    // 2: other header only
		{Key: nil, Value: []byte("v"), Headers: []kmsg.Header{{Key: "traceparent", Value: nil}, {Key: "traceparent", Value: []byte("second")}}}, // 3
		{Headers: batchtest.Headers("TraceParent", "case matters")},                                                                             // 4
	}
	raw := batchtest.EncodeRecords(recs...)
	type hit struct {
		rec   int
		value string
		null  bool
	}
	var got []hit
	err := EachHeader(raw, len(recs), "traceparent", func(i int, v []byte) bool {
		got = append(got, hit{i, string(v), v == nil})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []hit{{1, sc, false}, {3, "", true}, {3, "second", false}}
	if len(got) != len(want) {
		t.Fatalf("hits %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("hit %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	// fn returning false stops at once, without error.
	calls := 0
	if err := EachHeader(raw, len(recs), "traceparent", func(int, []byte) bool { calls++; return false }); err != nil || calls != 1 {
		t.Errorf("stop: %d calls, err %v", calls, err)
	}
	// count bounds the records read.
	calls = 0
	EachHeader(raw, 2, "a", func(int, []byte) bool { calls++; return true })
	if calls != 0 {
		t.Errorf("read past count: header of record 2 seen")
	}
}

// A record cut anywhere is reported as truncated, never a panic, and
// headers before the cut are still found.
func TestEachHeaderTruncated(t *testing.T) {
	sc := batchtest.Traceparent(1)
	first := batchtest.EncodeRecords(batchtest.TracedRecord(sc))
	raw := batchtest.EncodeRecords(batchtest.TracedRecord(sc), kmsg.Record{Key: []byte("key"), Value: []byte("value"), Headers: batchtest.Headers("traceparent", "x", "h", "v")})
	for cut := len(first) + 1; cut < len(raw); cut++ {
		seen := 0
		err := EachHeader(raw[:cut], 2, "traceparent", func(int, []byte) bool { seen++; return true })
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("cut %d of %d: err %v, want ErrTruncated", cut, len(raw), err)
		}
		if seen != 1 {
			t.Errorf("cut %d: %d headers seen, want the first record's", cut, seen)
		}
	}

	// A record whose own length is right but whose fields overrun it.
	inner := []byte{0}                      // attributes
	inner = binary.AppendVarint(inner, 0)   // timestamp delta
	inner = binary.AppendVarint(inner, 0)   // offset delta
	inner = binary.AppendVarint(inner, -1)  // null key
	inner = binary.AppendVarint(inner, 100) // value longer than the record
	inner = append(inner, "short"...)
	bad := append(binary.AppendVarint(nil, int64(len(inner))), inner...)
	if err := EachHeader(bad, 1, "traceparent", func(int, []byte) bool { return true }); !errors.Is(err, ErrTruncated) {
		t.Errorf("overrunning value: err %v", err)
	}
	// A header count larger than the headers present.
	inner = []byte{0, 0, 0, 1, 1}         // attributes, ts, offset, null key, null value
	inner = binary.AppendVarint(inner, 3) // three headers...
	inner = binary.AppendVarint(inner, 1) // ...but only one key byte
	inner = append(inner, 'k')
	bad = append(binary.AppendVarint(nil, int64(len(inner))), inner...)
	if err := EachHeader(bad, 1, "k", func(int, []byte) bool { return true }); !errors.Is(err, ErrTruncated) {
		t.Errorf("missing headers: err %v", err)
	}
	// A negative record length.
	if err := EachHeader(binary.AppendVarint(nil, -5), 1, "k", func(int, []byte) bool { return true }); !errors.Is(err, ErrTruncated) {
		t.Errorf("negative length: err %v", err)
	}
}
