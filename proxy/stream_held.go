package proxy

import (
	"crypto/tls"
	"net"
)

// heldConn is the connection under a tls.Conn. A peer's records often
// arrive together (a client writing requests one by one, a broker its
// responses), and tls.Conn reads them in one system call but returns one
// record per Read. While held is set, heldConn's Read fails at once
// instead of reading the socket, so a tls.Conn Read returns only a record
// it already holds whole: the stream reader uses it to put every record
// that has arrived into one batch (one write, and one record, to the
// other side) without a system call or a deadline change.
type heldConn struct {
	net.Conn
	held bool // only while the stream reader's goroutine reads
	// pending is set when a read of the socket may have left records in
	// tls.Conn's buffer, and cleared when a held read finds none whole.
	pending bool
}

// errHeld is what a held read returns: a temporary timeout to crypto/tls,
// which keeps the bytes of a partial record and does not fail the
// connection for it.
type errHeldRead struct{}

func (errHeldRead) Error() string   { return "no whole record held" }
func (errHeldRead) Timeout() bool   { return true }
func (errHeldRead) Temporary() bool { return true }

func (c *heldConn) Read(p []byte) (int, error) {
	if c.held {
		c.pending = false
		return 0, errHeldRead{}
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.pending = true
	}
	return n, err
}

// heldOf returns the heldConn under c, or nil when c is not a tls.Conn
// made over one.
func heldOf(c net.Conn) *heldConn {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil
	}
	h, _ := tc.NetConn().(*heldConn)
	return h
}
