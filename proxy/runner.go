package proxy

import (
	"context"
	"encoding/binary"
	"reflect"
	"unsafe"

	"github.com/bytedance/gopkg/util/gopool"
	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/framing"
)

// inlineMaxBytes bounds the input a batch relayed on the poller may hold:
// the poller serves every connection, so no one batch may keep it long.
const inlineMaxBytes = 64 << 10

// inlineResetBytes is how much of a side's input may be relayed on the
// poller before a batch goes to the pool, whose Release lets netpoll end
// the buffer node being filled. netpoll (v0.7.2) sizes a connection's
// next input node from the bytes read between two such releases
// (connection.Release: calcMaxSize, then resetTail); a Release on the
// poller cannot do it (the poller holds the fd's operator), so without
// this one node takes every read until it is full, the batch that crosses
// into the next node goes to the pool with a partial frame, and its
// Release records both nodes' fill: every full node doubled the next, up
// to netpoll's 8 MiB per connection. With a release at least this often,
// a node outgrows the bytes read between two of them (this plus one
// batch) at most once and then stops filling.
const inlineResetBytes = 96 << 10

// runTask is netpoll's Runner: it runs a connection's handler either on the
// poller goroutine that read the input ("inline") or in the goroutine pool.
// Inline is how an event loop like HAProxy works: the thread that was woken
// relays the bytes, with no wake-up of a second thread per frame. It is
// taken only when the batch cannot block: whole frames only, room in the
// in-flight table, no rule that could throttle, no frame a size rule must
// judge from its header, no SASL v0 exchange (frames may wait for the
// broker's answer), no Produce whose records the tracer may inflate
// (tracing.links.decompress: a decompression bomb stalled every
// connection on the poller), and the writer free. Everything else
// (partial frames, throttling rules, back-pressure, SASL, draining,
// inflating) runs in the pool as before. kproxy's own answers to refused
// requests are written by a goroutine (see queueAnswer). A handler on the
// poller must not panic past its own recover: netpoll would then close the
// connection on the poller, which waits for itself.
func runTask(ctx context.Context, f func()) {
	if p, ok := ctx.Value(pairKey{}).(*pair); ok && p.clientInline() {
		p.inClient = true
		f()
		p.inClient = false
		if p.upHanded {
			// A goroutine flushes what the socket did not take, and
			// lets go of upMu when done; started only now, so nothing
			// on the poller touches what upMu guards after it.
			p.upHanded = false
			p.holding.handed[fromClient].Store(int64(p.upstream.Writer().MallocLen()))
			go p.finishSend(p.upstream.Writer(), toUpstream, &p.upMu, "client", func(err error) error { return errUpstreamWrite{err} })
		} else {
			p.upMu.Unlock()
		}
		p.clientTask.Unlock()
		return
	}
	if p, ok := ctx.Value(upstreamKey{}).(*pair); ok && p.upstreamInline() {
		p.inUpstream = true
		f()
		p.inUpstream = false
		if p.clientHanded {
			p.clientHanded = false // as above, for wmu
			p.holding.handed[fromUpstream].Store(int64(p.client.Writer().MallocLen()))
			go p.finishSend(p.client.Writer(), toClient, &p.wmu, "upstream", func(err error) error { return errClientWrite{err} })
		} else {
			p.wmu.Unlock()
		}
		p.upstreamTask.Unlock()
		return
	}
	gopool.CtxGo(ctx, f)
}

// clientInline reports whether the client's buffered requests can be
// relayed on the poller, and if so takes clientTask and the upstream
// writer.
func (p *pair) clientInline() bool {
	if !p.s.inline || p.up == nil || p.failing.Load() || p.draining.Load() || p.sess.MayMute() {
		return false
	}
	eng := p.s.policies.Load()
	if eng.MayThrottle() {
		return false // a throttle pauses the client, which the poller cannot
	}
	if p.sess.Sasl() {
		return false // frames may have to wait for the broker's answer
	}
	if p.sess.ReauthDue() {
		return false // the upstream re-authenticates first, waiting for its answers
	}
	k, largest, keys, ok := wholeFrames(p.client.Reader(), p.s.framing.MaxRequestBytes, true)
	if !ok || keys.handshake || !p.sess.Room(k) {
		return false // a SaslHandshake v0 would hold the frames behind it
	}
	if keys.produce && p.s.tracer.InflatesRecords() {
		return false // inflating records, even within budget, is not the poller's work
	}
	if limit := eng.MaxFrame(); limit > 0 && largest > limit {
		return false // refused frames are judged from their header in the pool
	}
	if !p.clientTask.TryLock() {
		return false
	}
	if !p.inlineAllowance(fromClient, p.client.Reader().Len()) {
		p.clientTask.Unlock()
		return false
	}
	p.sess.PinRules(eng) // the rules this batch was admitted with
	// Checked under clientTask: close sets closed before it waits for it.
	if p.closed.Load() || !p.upMu.TryLock() {
		p.clientTask.Unlock()
		return false
	}
	return true
}

// upstreamInline reports whether the upstream's buffered responses can be
// relayed on the poller, and if so takes upstreamTask and the client
// writer.
func (p *pair) upstreamInline() bool {
	if !p.s.inline || p.cli == nil || !p.upReady.Load() || p.failing.Load() {
		return false
	}
	if _, _, _, ok := wholeFrames(p.upstream.Reader(), p.s.framing.MaxResponseBytes, false); !ok || !p.upstreamTask.TryLock() {
		return false
	}
	if !p.inlineAllowance(fromUpstream, p.upstream.Reader().Len()) {
		p.upstreamTask.Unlock()
		return false
	}
	if p.closed.Load() || !p.wmu.TryLock() {
		p.upstreamTask.Unlock()
		return false
	}
	return true
}

// inlineAllowance counts n bytes of side from about to be relayed on the
// poller, or, once inlineResetBytes have been since it last said no,
// reports false so this batch goes to the pool instead (see
// inlineResetBytes). The caller holds that side's task lock.
func (p *pair) inlineAllowance(from, n int) bool {
	if p.inlineRead[from]+n > inlineResetBytes {
		p.inlineRead[from] = 0
		return false
	}
	p.inlineRead[from] += n
	return true
}

// wholeFrames counts the frames buffered in r, with the largest frame's
// size, and reports whether they are all whole, valid and together no more
// than inlineMaxBytes. Only the poller adds input, and it is the caller,
// so the answer holds for the task it is about to run. For requests, keys
// says which of the API keys the runner cares about are among them, read
// from where a request keeps its api key; for responses, which have their
// correlation id there, it is left empty.
func wholeFrames(r netpoll.Reader, limit int, requests bool) (k, largest int, keys frameKeys, ok bool) {
	n := r.Len()
	if n < 4 || n > inlineMaxBytes {
		return 0, 0, frameKeys{}, false
	}
	b, err := r.Peek(n)
	if err != nil {
		return 0, 0, frameKeys{}, false
	}
	for len(b) >= 4 {
		size := int32(binary.BigEndian.Uint32(b))
		if size < 0 || int(size) > limit || int(size) > len(b)-4 {
			return 0, 0, frameKeys{}, false // partial or over the limit: the pool path reports it
		}
		if requests && size >= 2 {
			switch int16(binary.BigEndian.Uint16(b[4:])) {
			case framing.KeySaslHandshake:
				keys.handshake = true
			case framing.KeyProduce:
				keys.produce = true
			}
		}
		b = b[4+size:]
		k++
		largest = max(largest, 4+int(size))
	}
	return k, largest, keys, len(b) == 0
}

// frameKeys is what wholeFrames saw of a batch's request keys: a
// SaslHandshake (the frames behind it may have to wait for its answer)
// and a Produce (its records may be inflated for trace links).
type frameKeys struct{ handshake, produce bool }

// upstreamKey marks the context of a pair's upstream connection.
type upstreamKey struct{}

// setUpstreamContext gives a dialed connection the context its tasks are
// run with, so runTask can find the pair. netpoll v0.7.2 has no option for
// it on dialed connections (accepted ones get theirs from OnConnect), so
// the field is set directly; it must happen before SetOnRequest, when no
// task can read it yet. It reports false if netpoll's layout has changed:
// the upstream side then stays in the pool (see TestUpstreamRunsInline).
func setUpstreamContext(c netpoll.Connection, ctx context.Context) bool {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	f := v.Elem().FieldByName("ctx")
	if !f.IsValid() || f.Type() != reflect.TypeFor[context.Context]() {
		return false
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(ctx))
	return true
}
