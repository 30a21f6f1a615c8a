//go:build linux

package loop

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/relay"
)

// maxIovecs is how many slices one sendmsg takes (Linux IOV_MAX is 1024).
const maxIovecs = 512

// rawConn is one side's socket as the poller writes to it directly: a
// relay on the poller must never wait for a peer, and netpoll's Flush
// waits when the socket is full.
type rawConn struct {
	conn netpoll.Connection
	fd   int
	// out is entered across a raw write: the close waits for it before
	// netpoll closes the fd, so a write never reaches an fd number that
	// has been closed and reused.
	out  *writeGuard
	iov  relay.Batch // the batch being written; used by the writer's owner
	vecs []unix.Iovec
}

// newRawConn prepares c, whose writes out guards, for raw writes, or
// returns nil when c has no fd.
func newRawConn(c netpoll.Connection, out *writeGuard) *rawConn {
	fc, ok := c.(interface{ Fd() int })
	if !ok {
		return nil
	}
	return &rawConn{conn: c, fd: fc.Fd(), out: out}
}

// send writes the batch in r.iov without blocking. It returns true when
// the socket took all of it; otherwise the rest has been copied to the
// connection's netpoll writer, to be flushed by the caller's goroutine.
func (r *rawConn) send() (bool, error) {
	defer func() {
		clear(r.iov)
		r.iov = r.iov[:0]
	}()
	iov := r.iov
	for len(iov) > 0 {
		n, want, err := r.sendmsg(iov[:min(len(iov), maxIovecs)])
		if err != nil {
			return false, err
		}
		for left := n; left > 0; {
			if left < len(iov[0]) {
				iov[0] = iov[0][left:]
				break
			}
			left -= len(iov[0])
			iov = iov[1:]
		}
		for len(iov) > 0 && len(iov[0]) == 0 {
			iov = iov[1:]
		}
		if n < want {
			break // the socket is full
		}
	}
	if len(iov) == 0 {
		return true, nil
	}
	if err := r.out.copyIn(r.conn.Writer(), iov); err != nil {
		return false, err
	}
	return false, nil
}

// sendmsg writes one chunk of slices and returns the bytes the socket
// took (0 when it is full) and the bytes offered.
func (r *rawConn) sendmsg(chunk [][]byte) (n, want int, err error) {
	r.vecs = r.vecs[:0]
	for _, b := range chunk {
		if len(b) > 0 {
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			r.vecs = append(r.vecs, v)
			want += len(b)
		}
	}
	if want == 0 {
		return 0, 0, nil
	}
	var msg unix.Msghdr
	msg.Iov = &r.vecs[0]
	msg.SetIovlen(len(r.vecs))
	if !r.out.enter() {
		return 0, want, errGone
	}
	defer r.out.leave()
	for {
		sent, _, errno := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(r.fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_NOSIGNAL)
		switch errno {
		case 0:
			return int(sent), want, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, want, nil
		default:
			return 0, want, errno
		}
	}
}

// acked returns the bytes the peer has acknowledged on this socket, the
// progress a write to a slow reader makes; false if unknown.
func (r *rawConn) acked() (uint64, bool) {
	if r == nil {
		return 0, false
	}
	if !r.out.enter() {
		return 0, false
	}
	defer r.out.leave()
	info, err := unix.GetsockoptTCPInfo(r.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0, false
	}
	return info.Bytes_acked, true
}
