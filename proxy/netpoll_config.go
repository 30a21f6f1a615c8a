package proxy

import (
	"runtime"

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

// netpoll reads these globals as connections are made, and its docs ask
// for Configure in init, before any connection exists. With batches
// relayed on the pollers (runTask), the pollers do the relaying, so there
// is one per CPU kproxy may use (GOMAXPROCS follows the container's CPU
// limit) rather than netpoll's default of one per 20.
func init() {
	netpoll.LinkBufferCap = connBufferBytes
	err := netpoll.Configure(netpoll.Config{BufferSize: connBufferBytes, Runner: runTask,
		PollerNum: max(1, runtime.GOMAXPROCS(0))})
	if err != nil {
		panic(err) // only fails for a bad poller count
	}
}
