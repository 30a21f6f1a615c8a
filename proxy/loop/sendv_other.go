//go:build !linux

package loop

import (
	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/relay"
)

// rawConn writes a socket directly; only Linux has it, elsewhere every
// batch goes through netpoll's writer in the goroutine pool.
type rawConn struct{ iov relay.Batch }

func newRawConn(netpoll.Connection, *writeGuard) *rawConn { return nil }

func (*rawConn) send() (bool, error) { panic("raw sends are Linux only") }

// acked is unknown here: a flush's whole time counts as its stall.
func (*rawConn) acked() (uint64, bool) { return 0, false }
