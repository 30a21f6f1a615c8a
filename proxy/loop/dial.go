package loop

import (
	"errors"
	"time"

	"github.com/cloudwego/netpoll"
)

// dialAttempts bounds how often a dial that netpoll reports "closed by
// peer" is tried again.
const dialAttempts = 3

// dialUpstream dials addr with netpoll within timeout. netpoll can fail a
// fresh connect with ErrConnClosed when its poller delivers a hang-up meant
// for a just-closed connection whose operator the dial reused (seen on busy
// machines; cloudwego/netpoll#363), and a client would be reset for it. That
// error is tried again while the time allows. netpoll reports a refused
// connect the same way, so a refused dial costs two more attempts, each
// answered at once; every other error is returned as it is.
func dialUpstream(addr string, timeout time.Duration) (netpoll.Connection, error) {
	deadline := time.Now().Add(timeout)
	var err error
	for i := 0; i < dialAttempts; i++ {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		var c netpoll.Connection
		c, err = netpoll.DialConnection("tcp", addr, left)
		if err == nil || !errors.Is(err, netpoll.ErrConnClosed) {
			return c, err
		}
	}
	return nil, err
}
