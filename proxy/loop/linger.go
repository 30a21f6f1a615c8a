package loop

import "github.com/cloudwego/netpoll"

// linger waits up to the configured linger for more input on c and reports
// whether some arrived. Staying in the handler while a peer is busy avoids
// netpoll's per-dispatch task (an allocation and a goroutine wake-up), so a
// steady stream of frames is relayed with no allocation at all.
func (p *pair) linger(c netpoll.Connection) bool {
	r := c.Reader()
	if r.Len() > 0 {
		return true
	}
	lim := &p.d.k.Limits
	if lim.Linger <= 0 || p.c.Stopping() {
		return false
	}
	c.SetReadTimeout(lim.Linger)
	_, err := r.Peek(1)
	c.SetReadTimeout(lim.ReadTimeout)
	return err == nil
}
