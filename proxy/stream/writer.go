package stream

import (
	"net"
	"sync"
	"time"

	"github.com/kproxy/kproxy/relay"
)

// streamChunk is the most a stream writer hands the connection in one
// write: tls.Conn makes records of up to 16 KiB from it, so small frames
// share records (and syscalls) instead of taking one each, and a large
// frame is written in pieces, each bounded by write_timeout.
const streamChunk = 256 << 10

// streamDirect is the size from which a frame is written from where it
// lies rather than copied: beside a frame this large the write it would
// share is small, and the copy is not.
const streamDirect = 32 << 10

// streamCoalesce is how much of a batch's small frames is gathered into
// one write.
const streamCoalesce = 64 << 10

// writeBufs lend a writer its buffer for one batch, so an idle connection
// holds none. A buffer holds streamCoalesce and one small frame more,
// never growing.
var writeBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, streamCoalesce+streamDirect)
	return &b
}}

// streamWriter writes batches to one side of a TLS pair. Small frames are
// copied into one buffer and written together: for TLS the copy is small
// beside the encryption, and it turns a batch of small frames into a few
// records rather than a record and a syscall per frame.
type streamWriter struct {
	conn  net.Conn
	buf   []byte
	stall time.Duration // write_timeout: the most one chunk may take
	until time.Time     // the write deadline set on conn (zero: none)
}

// write writes the batch and empties it.
func (w *streamWriter) write(b *relay.Batch) error {
	defer b.Reset()
	bp := writeBufs.Get().(*[]byte)
	w.buf = (*bp)[:0]
	defer func() {
		*bp, w.buf = w.buf[:0], nil
		writeBufs.Put(bp)
	}()
	for _, f := range *b {
		if len(f) >= streamDirect {
			if err := w.flush(); err != nil {
				return err
			}
			for len(f) > 0 {
				n := min(len(f), streamChunk)
				if err := w.send(f[:n]); err != nil {
					return err
				}
				f = f[n:]
			}
			continue
		}
		if len(w.buf)+len(f) > streamCoalesce {
			if err := w.flush(); err != nil {
				return err
			}
		}
		w.buf = append(w.buf, f...) // within the buffer's capacity: f is under streamDirect
	}
	return w.flush()
}

// flush writes what is buffered.
func (w *streamWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.send(w.buf)
	w.buf = w.buf[:0]
	return err
}

// send writes p. A peer that takes nothing for write_timeout fails it:
// kproxy does not hold a batch for a reader that has stopped. The
// deadline is moved only when less than write_timeout of it is left, to
// write_timeout and an eighth from now: a write still gets at least
// write_timeout, and most writes skip re-arming the connection's timer.
func (w *streamWriter) send(p []byte) error {
	if w.stall > 0 {
		if now := time.Now(); w.until.Sub(now) < w.stall {
			w.until = now.Add(w.stall + w.stall/8)
			_ = w.conn.SetWriteDeadline(w.until)
		}
	}
	_, err := w.conn.Write(p)
	return err
}
