package audit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kproxy/kproxy/framing"
	"gopkg.in/natefinch/lumberjack.v2"
)

// Bounds on the writer's queue: lines wait there for the one writer
// goroutine, and past either bound a new line is dropped, so that an
// output that stops taking bytes costs a fixed amount of memory and never
// a request's time.
const (
	queueLines = 4096
	queueBytes = 32 << 20
	// drainTimeout is how long Close lets the writer finish what is queued.
	drainTimeout = 2 * time.Second
	// maxPending bounds the lines begun and not yet finished, process
	// wide: they wait on in-flight requests (256 per connection by
	// default), which a client that stops reading keeps in flight. Past
	// it, new lines are lean: leanLineBytes, the rest counted in
	// resources_omitted.
	maxPending    = 64 << 20
	leanLineBytes = 4 << 10
	// refusalShare is the share of the queue that lines of refusals of
	// APIs that change nothing may fill: a client refused thousands of
	// times a second must not crowd out the lines of real changes.
	refusalShare = 3 // of 4
)

// Env is what every line says of where kproxy runs.
type Env struct {
	Pod, Namespace string
}

// Log is an open audit log. A nil *Log is a log that is off: every method
// is a no-op, so the relay calls it unconditionally.
type Log struct {
	env  Env
	apis [framing.MaxKey + 1]bool
	m    *Metrics
	now  func() time.Time

	out    io.Writer
	closer io.Closer // nil for os.Stdout itself, which the log does not own

	// mu orders enqueues against Close: once closed is set no line enters
	// the queue, so the writer's drain sees every line that did.
	mu        sync.RWMutex
	closed    bool
	queue     chan queued
	queued    atomic.Int64 // bytes in queue, by builder's estimate
	maxQueued int64        // queueBytes; smaller in tests
	pending   atomic.Int64 // bytes of lines begun and not finished

	stop      chan struct{}
	done      chan struct{}
	drain     time.Duration
	closeOnce sync.Once
	closeErr  error // Close's answer, for every call
	outErr    error // the output's Close error, set by the writer before done
}

type queued struct {
	ln   *line
	cost int
}

// Open opens the log c describes and starts its writer; nil, nil when c is
// not enabled. m may be nil (counted unregistered).
func Open(c Config, m *Metrics, env Env) (*Log, error) {
	if !c.Enabled {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Output == Stdout {
		f, owned := openStdout()
		if !owned {
			return newLog(c, m, env, f, nil), nil
		}
		return newLog(c, m, env, f, f), nil
	}
	if isStream(c.Output) {
		st := &stream{path: c.Output}
		return newLog(c, m, env, st, st), nil
	}
	if err := canAppend(c.Output); err != nil {
		return nil, err
	}
	lj := &lumberjack.Logger{Filename: c.Output, MaxSize: c.maxSizeMiB(), MaxBackups: c.MaxFiles}
	return newLog(c, m, env, lj, lj), nil
}

// canAppend checks at start that the output file can be written, which
// the rotation library would only find out at the first line.
func canAppend(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("audit output: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit output: %w", err)
	}
	return f.Close()
}

// newLog starts a log writing to out, closing closer (if any) when it is
// closed. Tests hand it writers that block or fail.
func newLog(c Config, m *Metrics, env Env, out io.Writer, closer io.Closer) *Log {
	if m == nil {
		m = NewMetrics(nil)
	}
	l := &Log{
		env: env, m: m, now: time.Now,
		out: out, closer: closer,
		queue: make(chan queued, queueLines),
		stop:  make(chan struct{}), done: make(chan struct{}),
		drain: drainTimeout, maxQueued: queueBytes,
	}
	for k := range l.apis {
		l.apis[k] = ChangesCluster(int16(k)) && len(c.APIs) == 0
	}
	for _, name := range c.APIs {
		if k, ok := framing.KeyForName(name); ok && ChangesCluster(k) {
			l.apis[k] = true
		}
	}
	go l.run()
	return l
}

// Audits reports whether requests of key are audited: they change cluster
// state and the apis list, if any, names them. False on a nil Log, so the
// relay can skip decoding a body for nothing.
func (l *Log) Audits(key int16) bool {
	return l != nil && key >= 0 && int(key) < len(l.apis) && l.apis[key]
}

// enqueue hands a finished line to the writer, never waiting: a full
// queue drops it.
func (l *Log) enqueue(ln *line, cost int, refusal bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		l.m.drop(dropClosed)
		return
	}
	if refusal && (len(l.queue) >= cap(l.queue)*refusalShare/4 || l.queued.Load()+int64(cost) > l.maxQueued*refusalShare/4) {
		l.m.drop(dropQueueFull) // the last quarter is kept for changes
		return
	}
	if l.queued.Add(int64(cost)) > l.maxQueued {
		l.queued.Add(-int64(cost))
		l.m.drop(dropQueueFull)
		return
	}
	select {
	case l.queue <- queued{ln, cost}:
	default:
		l.queued.Add(-int64(cost))
		l.m.drop(dropQueueFull)
	}
}

// dropQueued empties the queue, counting each line dropped: Close's
// last step when the writer is stuck, so that no line goes uncounted.
func (l *Log) dropQueued() {
	for {
		select {
		case q := <-l.queue:
			l.queued.Add(-int64(q.cost))
			l.m.drop(dropClosed)
		default:
			return
		}
	}
}

// errBlocked is Close's error when the output did not take the queued
// lines in time; the writer is left to finish the write it is stuck in.
var errBlocked = errors.New("audit: output still blocked at close; queued lines dropped")

// Close writes what is queued (for up to 2s), stops the writer and closes
// the output file. Lines it could not write in that time, and lines
// finished afterwards, are dropped and counted. An output stuck in a
// write (a pipe nobody reads) keeps the writer until the write returns;
// Close does not wait for it, and answers errBlocked.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		close(l.stop)
		t := time.NewTimer(l.drain + l.drain/4)
		defer t.Stop()
		select {
		case <-l.done:
			l.closeErr = l.outErr
		case <-t.C:
			l.closeErr = errBlocked
			l.dropQueued()
		}
	})
	return l.closeErr
}
