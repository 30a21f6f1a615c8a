package proxy

import (
	"net"
	"time"

	"github.com/kproxy/kproxy/relay"
)

// streamChunk is the most a stream writer hands the connection in one
// write: tls.Conn makes records of up to 16 KiB from it, so small frames
// share records (and syscalls) instead of taking one each, and a large
// frame is written in pieces, each bounded by write_timeout.
const streamChunk = 256 << 10

// streamWriter writes batches to one side of a TLS pair. Frames are
// copied into one buffer and written a chunk at a time: for TLS the copy
// is small beside the encryption, and it turns a batch of small frames
// into a few records rather than a record and a syscall per frame.
type streamWriter struct {
	conn  net.Conn
	buf   []byte
	stall time.Duration // write_timeout: the most one chunk may take
}

// write writes the batch and empties it.
func (w *streamWriter) write(b *relay.Batch) error {
	defer b.Reset()
	for _, f := range *b {
		for len(f) > 0 {
			n := min(len(f), streamChunk-len(w.buf))
			w.buf = append(w.buf, f[:n]...)
			f = f[n:]
			if len(w.buf) == streamChunk {
				if err := w.flush(); err != nil {
					return err
				}
			}
		}
	}
	return w.flush()
}

// flush writes what is buffered. A peer that takes nothing for
// write_timeout fails it: kproxy does not hold a batch for a reader that
// has stopped.
func (w *streamWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if w.stall > 0 {
		_ = w.conn.SetWriteDeadline(time.Now().Add(w.stall))
	}
	_, err := w.conn.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}
