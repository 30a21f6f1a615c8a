package proxy

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/cloudwego/netpoll"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/relay"
)

// Bounds of proxy.socket_send_buffer_bytes and socket_receive_buffer_bytes
// when set: below 4 KiB the kernel raises the value to its own minimum
// anyway, and above 256 MiB it is a typo.
const (
	minSocketBuffer = 4 << 10
	maxSocketBuffer = 256 << 20
)

// socketBuffers sets SO_SNDBUF and SO_RCVBUF on the sockets of each pair,
// as proxy.socket_send_buffer_bytes and socket_receive_buffer_bytes say,
// and says once when the kernel gave less than was asked for.
type socketBuffers struct {
	send, recv int
	// largeSend is proxy.large_frame_send_buffer_bytes.
	largeSend int
	log       zerolog.Logger
	capped    sync.Once
}

// large gives c's socket the large-frame send buffer the first time
// kproxy writes a batch of more than inlineMaxBytes to it (done marks
// that): only connections that carry large frames get a fixed buffer,
// which made small requests slower. It holds c's write guard g, as a
// write does, so that the fd cannot be closed and reused meanwhile.
func (b *socketBuffers) large(c netpoll.Connection, g *writeGuard, done *atomic.Bool, batch *relay.Batch) {
	// A send buffer set for every socket at least as large stays: the
	// large-frame one never shrinks what the user asked for.
	if b.largeSend == 0 || b.send >= b.largeSend {
		return
	}
	n := 0
	for _, f := range *batch {
		n += len(f)
	}
	if n <= inlineMaxBytes {
		return
	}
	done.Store(true)
	if !g.enter() {
		return
	}
	defer g.leave()
	if fc, ok := c.(interface{ Fd() int }); ok {
		b.report(setSocketBuffers(fc.Fd(), b.largeSend, 0), b.largeSend, 0)
	}
}

// setConn sets the buffers of a netpoll connection.
func (b *socketBuffers) setConn(c netpoll.Connection) {
	if b.send == 0 && b.recv == 0 {
		return
	}
	if fc, ok := c.(interface{ Fd() int }); ok {
		b.report(setSocketBuffers(fc.Fd(), b.send, b.recv), b.send, b.recv)
	}
}

// setNet sets the buffers of a Go net connection (the stream driver's).
func (b *socketBuffers) setNet(c net.Conn) {
	if b.send == 0 && b.recv == 0 {
		return
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	var got sockBufs
	if err := raw.Control(func(fd uintptr) { got = setSocketBuffers(int(fd), b.send, b.recv) }); err == nil {
		b.report(got, b.send, b.recv)
	}
}

// report logs once when a buffer came out smaller than asked for: the
// kernel caps SO_SNDBUF and SO_RCVBUF at net.core.wmem_max and rmem_max,
// which only the host can raise.
func (b *socketBuffers) report(got sockBufs, send, recv int) {
	if got.err != nil {
		b.capped.Do(func() {
			b.log.Warn().Err(got.err).Msg("cannot set socket buffers (proxy.socket_send_buffer_bytes, socket_receive_buffer_bytes); the kernel's sizes are used")
		})
		return
	}
	// The kernel reports twice what it keeps for data, its bookkeeping
	// included; less than that means the value was capped.
	if (send > 0 && got.send < 2*send) || (recv > 0 && got.recv < 2*recv) {
		b.capped.Do(func() {
			b.log.Warn().Int("send_buffer_bytes", send).Int("receive_buffer_bytes", recv).
				Int("send_buffer_got", got.send/2).Int("receive_buffer_got", got.recv/2).
				Msg("the kernel capped the socket buffers asked for (net.core.wmem_max / rmem_max, set on the host); kproxy uses what it gave")
		})
	}
}

// sockBufs is what the kernel reports after setSocketBuffers.
type sockBufs struct {
	send, recv int
	err        error
}
