package framing_test

import (
	"testing"

	"github.com/kproxy/kproxy/framing"
)

// benchFrames are the common header shapes: v1 with a client id, and v2
// with a client id and an empty tag buffer (Produce v9 as franz-go sends it).
var benchFrames = [][]byte{
	requestFrame(reqHeader{key: 3, version: 4, corr: 1, clientID: []byte("consumer-1")}, 1, []byte{0, 0, 0, 0}),
	requestFrame(reqHeader{key: 0, version: 9, corr: 2, clientID: []byte("producer-1")}, 2, produceBody(9, -1, nil)),
}

var sinkHeader framing.RequestHeader

// BenchmarkParseRequestHeader measures the per-request cost on the relay's
// hot path, which must not allocate.
func BenchmarkParseRequestHeader(b *testing.B) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h, err := framing.ParseRequestHeader(benchFrames[i&1])
		if err != nil {
			b.Fatal(err)
		}
		sinkHeader = h
		i++
	}
}

// TestParseRequestHeaderDoesNotAllocate makes the zero-allocation promise a
// test failure rather than a number someone has to read.
func TestParseRequestHeaderDoesNotAllocate(t *testing.T) {
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		sinkHeader, _ = framing.ParseRequestHeader(benchFrames[i&1])
		i++
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per parse", allocs)
	}
}
