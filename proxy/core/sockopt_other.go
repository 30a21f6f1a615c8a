//go:build !unix

package core

// setSocketBuffers leaves the kernel's sizes where kproxy is not
// supported (netpoll's Windows build is a stub).
func setSocketBuffers(fd, send, recv int) sockBufs {
	return sockBufs{send: 2 * send, recv: 2 * recv}
}
