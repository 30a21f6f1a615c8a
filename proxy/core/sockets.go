package core

import (
	"net"
	"sync"

	"github.com/rs/zerolog"
)

// Bounds of proxy.socket_send_buffer_bytes and socket_receive_buffer_bytes
// when set: below 4 KiB the kernel raises the value to its own minimum
// anyway, and above 256 MiB it is a typo.
const (
	MinSocketBuffer = 4 << 10
	MaxSocketBuffer = 256 << 20
)

// Sockets sets SO_SNDBUF and SO_RCVBUF on the sockets of each
// connection, as proxy.socket_send_buffer_bytes and
// socket_receive_buffer_bytes say, and says once when the kernel gave
// less than was asked for.
type Sockets struct {
	Send, Recv int
	// LargeSend is proxy.large_frame_send_buffer_bytes, set by a driver
	// on an upstream socket once it carries a large batch.
	LargeSend int
	Log       zerolog.Logger
	capped    sync.Once
}

// WantsLarge reports whether a socket that carries a large batch should
// get LargeSend: a send buffer set for every socket at least as large
// stays, the large-frame one never shrinks what the user asked for.
func (b *Sockets) WantsLarge() bool { return b.LargeSend != 0 && b.Send < b.LargeSend }

// SetLarge gives the socket fd the large-frame send buffer.
func (b *Sockets) SetLarge(fd int) { b.report(setSocketBuffers(fd, b.LargeSend, 0), b.LargeSend, 0) }

// SetFd sets the buffers of the socket fd.
func (b *Sockets) SetFd(fd int) {
	if b.Send == 0 && b.Recv == 0 {
		return
	}
	b.report(setSocketBuffers(fd, b.Send, b.Recv), b.Send, b.Recv)
}

// SetNet sets the buffers of a Go net connection.
func (b *Sockets) SetNet(c net.Conn) {
	if b.Send == 0 && b.Recv == 0 {
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
	if err := raw.Control(func(fd uintptr) { got = setSocketBuffers(int(fd), b.Send, b.Recv) }); err == nil {
		b.report(got, b.Send, b.Recv)
	}
}

// report logs once when a buffer came out smaller than asked for: the
// kernel caps SO_SNDBUF and SO_RCVBUF at net.core.wmem_max and rmem_max,
// which only the host can raise.
func (b *Sockets) report(got sockBufs, send, recv int) {
	if got.err != nil {
		b.capped.Do(func() {
			b.Log.Warn().Err(got.err).Msg("cannot set socket buffers (proxy.socket_send_buffer_bytes, socket_receive_buffer_bytes); the kernel's sizes are used")
		})
		return
	}
	// The kernel reports twice what it keeps for data, its bookkeeping
	// included; less than that means the value was capped.
	if (send > 0 && got.send < 2*send) || (recv > 0 && got.recv < 2*recv) {
		b.capped.Do(func() {
			b.Log.Warn().Int("send_buffer_bytes", send).Int("receive_buffer_bytes", recv).
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
