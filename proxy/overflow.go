package proxy

import "time"

// overflowSweep is how often every pair's unread input is checked against
// max_unread_bytes. netpoll reads whatever arrives, so at loopback rates
// (~400 MB/s from one client) memory can pass the bound by about this
// period's worth of input before the pair is closed.
const overflowSweep = 10 * time.Millisecond

// watchOverflow closes each pair whose unread input on either side has
// passed max_unread_bytes. The relay checks this itself between batches,
// but a relay blocked flushing to a peer that has stopped reading cannot,
// and netpoll goes on reading the other side meanwhile: without this
// sweep one client flooding a stalled upstream grows memory until
// write_timeout.
func (s *Server) watchOverflow() {
	t := time.NewTicker(overflowSweep)
	defer t.Stop()
	var over []*pair
	var sides []string
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		for p := range s.pairs {
			switch {
			case p.client.Reader().Len() > s.cfg.MaxUnreadBytes:
				over, sides = append(over, p), append(sides, "client")
			case p.upstream.Reader().Len() > s.cfg.MaxUnreadBytes:
				over, sides = append(over, p), append(sides, "upstream")
			}
		}
		s.mu.Unlock()
		for i, p := range over {
			p.closeOnError(sides[i], errOverflow)
		}
		clear(over)
		over, sides = over[:0], sides[:0]
	}
}
