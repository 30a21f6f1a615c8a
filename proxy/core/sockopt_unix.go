//go:build unix

package core

import "syscall"

// setSocketBuffers sets SO_SNDBUF and SO_RCVBUF (where above 0) on fd and
// reads back what the kernel kept.
func setSocketBuffers(fd, send, recv int) sockBufs {
	var got sockBufs
	if send > 0 {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, send); err != nil {
			return sockBufs{err: err}
		}
		got.send, got.err = syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	}
	if recv > 0 && got.err == nil {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, recv); err != nil {
			return sockBufs{err: err}
		}
		got.recv, got.err = syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	}
	return got
}
