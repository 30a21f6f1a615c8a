package proxy

import "github.com/cloudwego/netpoll"

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
// for Configure in init, before any connection exists.
func init() {
	netpoll.LinkBufferCap = connBufferBytes
	if err := netpoll.Configure(netpoll.Config{BufferSize: connBufferBytes}); err != nil {
		panic(err) // only fails for a bad poller count, which is not set here
	}
}
