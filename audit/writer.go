package audit

import (
	"encoding/json"
	"time"
)

// run is the one writer goroutine: it marshals and writes lines in the
// order they were finished, so a request never waits on the output.
func (l *Log) run() {
	defer close(l.done)
	resync := false
	for {
		select {
		case q := <-l.queue:
			resync = l.write(q, resync)
		case <-l.stop:
			l.finish(resync)
			return
		}
	}
}

// finish writes what is left in the queue until the drain deadline,
// drops the rest, and closes the output. No line enters the queue once
// stop is closed; Close may be emptying it too, if it gave up waiting.
func (l *Log) finish(resync bool) {
	deadline := time.Now().Add(l.drain)
	for more := true; more; {
		select {
		case q := <-l.queue:
			if time.Now().After(deadline) {
				l.queued.Add(-int64(q.cost))
				l.m.drop(dropClosed)
				continue
			}
			resync = l.write(q, resync)
		default:
			more = false
		}
	}
	if l.closer != nil {
		l.outErr = l.closer.Close() // read by Close once done is closed
	}
}

// write writes one line in a single Write, so that a rotated file never
// splits it. After a write that failed partway, resync is true and the
// next line starts on a fresh one, so the output stays one JSON object a
// line. It returns resync for the next write.
func (l *Log) write(q queued, resync bool) bool {
	defer l.queued.Add(-int64(q.cost))
	b, err := json.Marshal(q.ln)
	if err != nil {
		l.m.writeErrors.Inc()
		l.m.drop(dropWriteFailed)
		return resync
	}
	if resync {
		b = append([]byte{'\n'}, b...)
	}
	b = append(b, '\n')
	n, err := l.out.Write(b)
	if err != nil {
		l.m.writeErrors.Inc()
		l.m.drop(dropWriteFailed)
		return resync || n > 0
	}
	l.m.lines.Inc()
	return false
}
