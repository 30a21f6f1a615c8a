package loop

import (
	"runtime"
	"sync"

	"github.com/cloudwego/netpoll"
)

// connBufferBytes is the size of netpoll's buffer nodes: the first read
// buffer of each connection and the smallest node any buffer grows by.
// netpoll's defaults (an 8 KiB input node and a 4 KiB output node per
// connection) cost an idle pair 24 KiB. Reads double their buffer each
// time one fills and nodes are as large as the write that needs them, so
// busy connections reach the same sizes after a few reads (measured: no
// change in throughput at 64 x 8 or 1 x 64), and 10,000 idle pairs stay
// under 150 MiB.
const connBufferBytes = 1 << 10

var netpollOnce struct {
	sync.Once
	err error
}

// Configure sets netpoll's process-wide settings for kproxy's
// relay: its buffer sizes, runTask as the runner (so batches that cannot
// block are relayed on the poller), and one poller per CPU kproxy may use
// (GOMAXPROCS follows the container's CPU limit) rather than netpoll's
// default of one per 20. netpoll reads these globals as connections are
// made, so the program calls it once at start, before any Driver
// listens; it is not done on import, so that a program that only loads a
// configuration (kproxy validate, tools) leaves netpoll as it found it.
// Later calls do nothing. A Driver without it works, relaying every batch
// in netpoll's goroutine pool.
func Configure() error {
	netpollOnce.Do(func() {
		netpoll.LinkBufferCap = connBufferBytes
		netpollOnce.err = netpoll.Configure(netpoll.Config{BufferSize: connBufferBytes, Runner: runTask,
			PollerNum: max(1, runtime.GOMAXPROCS(0))})
	})
	return netpollOnce.err
}
