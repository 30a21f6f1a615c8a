package stream

import (
	"crypto/tls"
	"encoding/binary"
	"net"

	"github.com/kproxy/kproxy/tlsconf"
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
	// hs is the client handshake under way on it, nil after (and on
	// upstream connections): reads note its progress, the first write
	// (the server's first flight) gives back its cpu slot.
	hs   *handshake
	held bool // only while the stream reader's goroutine reads
	// whole is how many whole records the last read of the socket
	// brought beyond the one tls.Conn was reading: a held read takes one
	// without going to the socket (where crypto/tls would allocate), and
	// a read that brought one record, the usual case one request at a
	// time, costs no held read at all.
	whole int
	// The record stream read so far: the header bytes of the record
	// under way (hn of them), and what is left of its body.
	hdr  [recordHeaderLen]byte
	hn   int
	left int
}

// recordHeaderLen is a TLS record header's length (type, version,
// length), the same in every TLS version.
const recordHeaderLen = 5

// errHeldRead is what a held read returns: a temporary timeout to crypto/tls,
// which keeps the bytes of a partial record and does not fail the
// connection for it.
type errHeldRead struct{}

func (errHeldRead) Error() string   { return "no whole record held" }
func (errHeldRead) Timeout() bool   { return true }
func (errHeldRead) Temporary() bool { return true }

func (c *heldConn) Read(p []byte) (int, error) {
	if c.held {
		c.whole = 0
		return 0, errHeldRead{}
	}
	n, err := c.Conn.Read(p)
	if n > 0 && c.hs != nil {
		c.hs.read()
	}
	if err != nil && c.hs != nil && c.hs.evicted() {
		err = tlsconf.ErrEvicted // its socket was closed for a newcomer
	}
	if n > 0 {
		// tls.Conn reads the socket only when its buffer lacks the
		// record it is reading, which the first end completes.
		c.whole = max(c.recordEnds(p[:n])-1, 0)
	}
	return n, err
}

// recordEnds follows the record stream over p, its next bytes, and
// counts the records that end in p.
func (c *heldConn) recordEnds(p []byte) int {
	ends := 0
	for len(p) > 0 {
		if c.left == 0 && c.hn < recordHeaderLen { // in a header
			k := copy(c.hdr[c.hn:], p)
			c.hn += k
			p = p[k:]
			if c.hn < recordHeaderLen {
				break
			}
			c.left = int(binary.BigEndian.Uint16(c.hdr[3:]))
			if c.left == 0 {
				c.hn = 0
				ends++
			}
			continue
		}
		k := min(c.left, len(p))
		c.left -= k
		p = p[k:]
		if c.left == 0 {
			c.hn = 0
			ends++
		}
	}
	return ends
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

// Write writes p; during a client handshake the first write is the
// server's flight, computed, so the handshake's cpu slot goes back.
func (c *heldConn) Write(p []byte) (int, error) {
	if c.hs != nil {
		c.hs.releaseCPU()
	}
	n, err := c.Conn.Write(p)
	if err != nil && c.hs != nil && c.hs.evicted() {
		err = tlsconf.ErrEvicted
	}
	return n, err
}
