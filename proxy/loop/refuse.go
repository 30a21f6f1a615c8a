package loop

import (
	"syscall"

	"github.com/cloudwego/netpoll"
)

// refuse closes a client kproxy will not serve (its upstream cannot be
// dialled, kproxy is draining, or max_connections is reached) with a TCP
// reset instead of an orderly close. Clients retry a reset like a refused
// connection, as a passing network fault. An orderly close before the
// first response is what a TLS or SASL listener does to a client that
// spoke the wrong protocol, and some clients (franz-go among them) take it
// as a misconfiguration and fail the records they hold.
func refuse(c netpoll.Connection) {
	if fc, ok := c.(interface{ Fd() int }); ok {
		// Linger 0 turns close into a reset. If it fails the close is an
		// orderly one, which is still a close.
		_ = syscall.SetsockoptLinger(fc.Fd(), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
	}
	c.Close()
}
