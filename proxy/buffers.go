package proxy

import (
	"sync"

	"github.com/cloudwego/netpoll"
)

// connBufferBytes is the first buffer node netpoll gives each connection's
// input and output. netpoll's defaults (8 KiB in, 4 KiB out) cost an idle
// pair 24 KiB; both sides grow their reads and nodes on demand (a read
// that fills its buffer doubles the next one), so busy connections reach
// the same sizes after a few reads, and 10,000 idle pairs stay small.
const connBufferBytes = 1 << 10

var tuneNetpoll sync.Once

// tuneBuffers sets netpoll's buffer sizes, once per process and before any
// connection exists: they are package globals read as connections are made.
func tuneBuffers() {
	tuneNetpoll.Do(func() {
		netpoll.LinkBufferCap = connBufferBytes
		if err := netpoll.Configure(netpoll.Config{BufferSize: connBufferBytes}); err != nil {
			panic(err) // only fails for a bad poller count, which is not set here
		}
	})
}
