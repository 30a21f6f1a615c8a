package loop

import "github.com/kproxy/kproxy/relay"

// large gives the upstream socket the large-frame send buffer
// (proxy.large_frame_send_buffer_bytes) the first time kproxy writes a
// batch of more than relay.InlineMaxBytes to it (upLarge marks that):
// only connections that carry large frames get a fixed buffer, which
// made small requests slower. It holds the upstream's write guard, as a
// write does, so that the fd cannot be closed and reused meanwhile.
func (p *pair) large(batch *relay.Batch) {
	sk := &p.d.k.Sockets
	if !sk.WantsLarge() {
		return
	}
	if batch.Bytes() <= relay.InlineMaxBytes {
		return
	}
	p.upLarge.Store(true)
	if !p.upOut.enter() {
		return
	}
	defer p.upOut.leave()
	if fc, ok := p.upstream.(interface{ Fd() int }); ok {
		sk.SetLarge(fc.Fd())
	}
}
