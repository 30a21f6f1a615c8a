package records

import (
	"runtime"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxZstdWindow bounds the history a zstd frame may ask the decoder to
// keep, which the streaming decoder allocates up front. 8 MiB is what
// zstd uses up to level 19 and klauspost's encoder by default, so real
// producers fit; a frame asking for more is not read.
const maxZstdWindow = 8 << 20

// Decoders are pooled, one per inflation at a time, so concurrent
// requests never wait on each other's decoder (one shared decoder made
// every request wait for the one before). A decoder holds up to a window
// of memory, which the pool gives back to the collector when idle.
var (
	zstdDecoders = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderMaxMemory(maxZstdWindow))
		if err != nil {
			panic(err) // the options are constants
		}
		return d
	}}
	gzipDecoders = sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4Decoders  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
)

// inflateSlots bounds the inflations running at once across the process,
// and so the decoder windows and output buffers alive at once. Taking a
// slot never waits: a batch that finds none free is not read (its links
// are marked incomplete), so a flood of bombs costs others nothing but
// their own links. Half the CPUs at most: inflating runs on the relay's
// goroutines, and a slot per CPU would let bombs take every CPU from the
// clients relayed beside them.
var inflateSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// TakeSlot reserves an inflation slot, or reports false when all are in
// use.
func TakeSlot() bool {
	select {
	case inflateSlots <- struct{}{}:
		return true
	default:
		return false
	}
}

func GiveSlot() { <-inflateSlots }

// WaitSlot reserves an inflation slot, waiting up to d for one: for
// readers that must judge records (policy's record conditions) and run
// where they may wait, never on the poller.
func WaitSlot(d time.Duration) bool {
	if TakeSlot() {
		return true
	}
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case inflateSlots <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}
