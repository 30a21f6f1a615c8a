package proxy

import (
	"time"

	"github.com/cloudwego/netpoll"
)

// overflowSweep is how often the pairs whose relay is blocked are checked
// against max_unread_bytes. netpoll reads whatever arrives, so at loopback
// rates (~400 MB/s from one client) memory can pass the bound by about this
// period's worth of input before the pair is closed.
const overflowSweep = 10 * time.Millisecond

// flush writes w's batch. A relay blocked here (the peer has stopped
// reading) cannot check its other side's unread input, which netpoll keeps
// growing, so it is marked for the overflow sweep meanwhile.
func (p *pair) flush(w netpoll.Writer) error {
	p.blocked.Add(1)
	defer p.blocked.Add(-1)
	return w.Flush()
}

// overflowing is a pair to close and the side that outran it.
type overflowing struct {
	p    *pair
	side string
}

// watchOverflow closes each blocked pair whose unread input on either side
// has passed max_unread_bytes; a relay that is not blocked checks this
// itself between batches. Without it one client flooding an upstream that
// has stopped reading grows memory until write_timeout.
func (s *Server) watchOverflow() {
	t := time.NewTicker(overflowSweep)
	defer t.Stop()
	var over []overflowing
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		for p := range s.pairs {
			if p.blocked.Load() == 0 {
				continue
			}
			switch {
			case p.client.Reader().Len() > s.cfg.MaxUnreadBytes:
				over = append(over, overflowing{p, "client"})
			case p.upstream.Reader().Len() > s.cfg.MaxUnreadBytes:
				over = append(over, overflowing{p, "upstream"})
			}
		}
		s.mu.Unlock()
		for _, o := range over {
			o.p.closeOnError(o.side, errOverflow)
		}
		clear(over)
		over = over[:0]
	}
}
