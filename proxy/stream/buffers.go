package stream

import (
	"math/bits"
	"sync"
)

// Read buffers larger than streamReadMin come from pools by size class
// (streamReadMin doubled 1 to streamClasses times), so a connection gives
// its large buffer back as soon as it idles at a frame boundary and a
// stream of large frames reuses buffers instead of allocating one per
// frame. Larger frames get buffers of their own.
const streamClasses = 12 // up to 64 MiB

var streamPools [streamClasses + 1]sync.Pool

// streamClass is the class of the smallest pooled buffer of at least n
// bytes (n > streamReadMin), or 0 when n is over the largest class.
func streamClass(n int) int {
	k := bits.Len(uint((n - 1) / streamReadMin))
	if k > streamClasses {
		return 0
	}
	return k
}

// getStreamBuf returns a buffer of at least n bytes (n > streamReadMin)
// and the handle to give it back with (nil for one not pooled).
func getStreamBuf(n int) ([]byte, *[]byte) {
	k := streamClass(n)
	if k == 0 {
		return make([]byte, n), nil
	}
	if p, ok := streamPools[k].Get().(*[]byte); ok {
		return *p, p
	}
	b := make([]byte, streamReadMin<<k)
	return b, &b
}

// putStreamBuf gives a pooled buffer back; no slice of it may be in use.
func putStreamBuf(p *[]byte) {
	if p != nil {
		streamPools[streamClass(len(*p))].Put(p)
	}
}
