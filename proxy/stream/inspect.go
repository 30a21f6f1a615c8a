package stream

import (
	"crypto/tls"
	"net"

	"github.com/kproxy/kproxy/proxy/core"
)

// Sockets returns the client and upstream sockets under c (under TLS
// where a side speaks it), false when c is not this driver's. It is for
// tests and diagnostics; nothing in kproxy's relay reads it.
func Sockets(c *core.Conn) (client, upstream net.Conn, ok bool) {
	st, ok := c.Transport().(*stream)
	if !ok {
		return nil, nil, false
	}
	return socketOf(st.client), socketOf(st.upstream), true
}

// socketOf is the connection under c's TLS, if any.
func socketOf(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if h, ok := c.(*heldConn); ok {
		c = h.Conn
	}
	return c
}

// SetHandshakeCPUSlots sets how many client handshakes compute at once on
// listeners made after it (0: the default, one less than GOMAXPROCS) and
// returns what puts the previous value back. It is for benchmarks that
// measure the bound against none; kproxy itself never calls it.
func SetHandshakeCPUSlots(n int) (restore func()) {
	old := cpuSlotsSet.Swap(int32(n))
	return func() { cpuSlotsSet.Store(old) }
}
