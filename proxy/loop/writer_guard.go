package loop

import (
	"errors"
	"sync"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/relay"
)

var errGone = errors.New("connection closed")

// writeGuard keeps kproxy's writes to one connection apart from that
// connection's close. netpoll's close frees the connection's buffers to a
// pool shared by every connection, excluding only the connection's own
// handler and a Flush under way. kproxy writes a connection from other
// goroutines (the peer's handler, a poller's send, the answer writer), so
// bytes copied into the writer while it closed could land in a buffer
// already given to another connection, and go out on it: a client's
// response sent to some broker as a request. The close waits for a write
// in progress, and no write starts after it.
type writeGuard struct {
	// mu is held shared while writing, and taken by the close callback
	// before netpoll frees the buffers or closes the fd.
	mu   sync.RWMutex
	gone bool
}

// guardWrites makes the guard for c's writer.
func guardWrites(c netpoll.Connection) *writeGuard {
	g := &writeGuard{}
	// Close callbacks run newest first, so this one runs before the one
	// netpoll added when it made the connection, which frees its buffers
	// and closes the fd.
	c.AddCloseCallback(func(netpoll.Connection) error {
		g.mu.Lock()
		g.gone = true
		g.mu.Unlock()
		return nil
	})
	if !c.IsActive() {
		// Closed before the callback was added: it may never run.
		g.mu.Lock()
		g.gone = true
		g.mu.Unlock()
	}
	return g
}

// enter starts a write; false if the connection has closed. A write
// between enter and leave must not wait, nor close any connection: the
// close callback, which may run on a poller, waits for it.
func (g *writeGuard) enter() bool {
	g.mu.RLock()
	if g.gone {
		g.mu.RUnlock()
		return false
	}
	return true
}

func (g *writeGuard) leave() { g.mu.RUnlock() }

// writeBatch copies (or, for large frames, links) b into w, the guarded
// connection's writer, and empties it; flushing is netpoll's to keep
// apart from the close.
func (g *writeGuard) writeBatch(w netpoll.Writer, b *relay.Batch) error {
	defer b.Reset()
	if !g.enter() {
		return errGone
	}
	defer g.leave()
	for _, f := range *b {
		if _, err := w.WriteBinary(f); err != nil {
			return err
		}
	}
	return nil
}

// copyIn copies bufs into w, the guarded connection's writer, to be
// flushed later.
func (g *writeGuard) copyIn(w netpoll.Writer, bufs [][]byte) error {
	if !g.enter() {
		return errGone
	}
	defer g.leave()
	for _, b := range bufs {
		buf, err := w.Malloc(len(b))
		if err != nil {
			return err
		}
		copy(buf, b)
	}
	return nil
}
