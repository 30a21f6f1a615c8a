package loop

import (
	"context"
	"reflect"
	"unsafe"

	"github.com/bytedance/gopkg/util/gopool"
	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
)

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
// taken only when the batch cannot block: the session says its frames can
// run without waiting (relay.Session.RequestsInline: whole frames, room
// in the table, no throttling rule, no SASL exchange, ...), and the
// writer is free. Everything else (partial frames, throttling rules,
// back-pressure, SASL, draining, inflating) runs in the pool. kproxy's own answers to refused
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
			go p.finishSend(p.upstream.Writer(), toUpstream, &p.upMu, "client", func(err error) error { return core.UpstreamWriteError{Err: err} })
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
			go p.finishSend(p.client.Writer(), toClient, &p.c.WMu, "upstream", func(err error) error { return core.ClientWriteError{Err: err} })
		} else {
			p.c.WMu.Unlock()
		}
		p.upstreamTask.Unlock()
		return
	}
	gopool.CtxGo(ctx, f)
}

// clientInline reports whether the client's buffered requests can be
// relayed on the poller, and if so takes clientTask and the upstream
// writer. The transport's conditions are the driver's (inline on, the
// pair healthy and relaying, the writers free); whether the frames may
// run without waiting is the session's (relay.Session.RequestsInline).
func (p *pair) clientInline() bool {
	if !p.d.inline || p.up == nil || p.failing.Load() || p.c.Stopping() {
		return false
	}
	b, ok := buffered(p.client.Reader())
	if !ok || !p.clientTask.TryLock() {
		return false
	}
	if !p.sess.RequestsInline(b) || !p.inlineAllowance(fromClient, len(b)) {
		p.clientTask.Unlock()
		return false
	}
	// Checked under clientTask: Close moves to closed before it waits
	// for it.
	if p.c.Closed() || !p.upMu.TryLock() {
		p.clientTask.Unlock()
		return false
	}
	return true
}

// upstreamInline reports whether the upstream's buffered responses can be
// relayed on the poller, and if so takes upstreamTask and the client
// writer.
func (p *pair) upstreamInline() bool {
	if !p.d.inline || p.cli == nil || !p.upReady.Load() || p.failing.Load() {
		return false
	}
	b, ok := buffered(p.upstream.Reader())
	if !ok || !p.sess.ResponsesInline(b) || !p.upstreamTask.TryLock() {
		return false
	}
	if !p.inlineAllowance(fromUpstream, len(b)) {
		p.upstreamTask.Unlock()
		return false
	}
	if p.c.Closed() || !p.c.WMu.TryLock() {
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

// buffered returns everything r holds, when that is at least a size
// prefix and at most relay.InlineMaxBytes. Only the poller adds input,
// and it is the caller, so what it returns holds for the task it is
// about to run.
func buffered(r netpoll.Reader) ([]byte, bool) {
	n := r.Len()
	if n < framing.SizeLen || n > relay.InlineMaxBytes {
		return nil, false
	}
	b, err := r.Peek(n)
	return b, err == nil
}

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
