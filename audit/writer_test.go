package audit

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// blockingWriter never returns from Write; entered is closed at the first.
type blockingWriter struct {
	entered chan struct{}
	once    atomic.Bool
	release chan struct{}
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if w.once.CompareAndSwap(false, true) {
		close(w.entered)
	}
	<-w.release
	return 0, errors.New("released")
}

// settleMany begins and settles n DeleteTopics lines, failing the test if
// that does not finish in time: Begin and Settle must never wait on the
// output.
func settleMany(t *testing.T, l *Log, n int) {
	t.Helper()
	req := deleteTopicsReq(t, "a")
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.Topics = []kmsg.DeleteTopicsResponseTopic{{Topic: ptr("a")}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			l.Begin(testConn, req.Key(), 4, req).Settle(resp)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d Begin/Settle calls did not return: the relay would be stuck behind the output", n)
	}
}

// A writer stuck forever: every line is written, queued, in the stuck
// Write, or dropped and counted, and the callers never wait.
func TestBlockedOutputDropsAndCounts(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	m := NewMetrics(prometheus.NewRegistry())
	l := newLog(Config{}, m, Env{}, w, nil)
	l.drain = 50 * time.Millisecond
	defer close(w.release)

	const n = 3 * queueLines
	settleMany(t, l, n)
	<-w.entered // the writer holds one line, stuck
	dropped := testutil.ToFloat64(m.dropped.WithLabelValues(dropQueueFull))
	if want := float64(n - 1 - len(l.queue)); dropped != want {
		t.Errorf("dropped{queue_full} = %v, want %v (n %d, queued %d, 1 in the stuck write)", dropped, want, n, len(l.queue))
	}
	if len(l.queue) < queueLines-1 {
		t.Errorf("queue holds %d lines, want it full (%d)", len(l.queue), queueLines)
	}
	queued := len(l.queue)
	if err := l.Close(); !errors.Is(err, errBlocked) {
		t.Errorf("Close = %v, want %v", err, errBlocked)
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues(dropClosed)); got != float64(queued) {
		t.Errorf("dropped{closed} = %v after Close, want the %d lines it could not write", got, queued)
	}
	settleMany(t, l, 10)
	if got := testutil.ToFloat64(m.dropped.WithLabelValues(dropClosed)); got != float64(queued+10) {
		t.Errorf("dropped{closed} = %v after 10 lines past Close, want %d", got, queued+10)
	}
}

// The queue is bounded in bytes as well as lines: big lines stop at the
// byte bound, well before the line bound.
func TestQueueByteBound(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	m := NewMetrics(prometheus.NewRegistry())
	l := newLog(Config{}, m, Env{}, w, nil)
	l.drain = 50 * time.Millisecond
	l.maxQueued = 1 << 20
	defer close(w.release)
	req := hugeCreateTopics(2000) // about 600 KB a line, by the estimate
	for range 20 {
		l.BeginRefusal(testConn, req.Key(), 5, req).Unknown()
	}
	<-w.entered
	if n := len(l.queue); n > 1 {
		t.Errorf("%d big lines queued under a 1 MiB bound", n)
	}
	if q := l.queued.Load(); q > l.maxQueued {
		t.Errorf("%d bytes queued, over the bound", q)
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues(dropQueueFull)); got < 18 {
		t.Errorf("dropped{queue_full} = %v, want at least 18 of 20", got)
	}
	l.Close()
}

// The same through a pipe nobody reads, as a stalled log collector on
// stdout would be: its buffer takes some lines, the rest wait or drop.
func TestPipeNobodyReads(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	l := newLog(Config{}, m, Env{}, w, nil)
	l.drain = 50 * time.Millisecond
	settleMany(t, l, 3*queueLines)
	if got := testutil.ToFloat64(m.dropped.WithLabelValues(dropQueueFull)); got < queueLines {
		t.Errorf("dropped{queue_full} = %v, want at least %d", got, queueLines)
	}
	start := time.Now()
	if err := l.Close(); !errors.Is(err, errBlocked) {
		t.Errorf("Close = %v, want %v", err, errBlocked)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v with the output blocked", d)
	}
	r.Close() // the stuck write fails; the writer drops the rest and exits
	w.Close()
	<-l.done
	total := testutil.ToFloat64(m.lines) + testutil.ToFloat64(m.dropped.WithLabelValues(dropQueueFull)) +
		testutil.ToFloat64(m.dropped.WithLabelValues(dropWriteFailed)) + testutil.ToFloat64(m.dropped.WithLabelValues(dropClosed))
	if total != 3*queueLines {
		t.Errorf("written + dropped = %v, want every line (%d) accounted for", total, 3*queueLines)
	}
}

type failingWriter struct{ calls atomic.Int64 }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.calls.Add(1)
	return 0, errors.New("no space left on device")
}

// An output that fails every write: each line is dropped and counted,
// nothing panics, Close still finishes.
func TestFailingOutput(t *testing.T) {
	fw := &failingWriter{}
	m := NewMetrics(prometheus.NewRegistry())
	l := newLog(Config{}, m, Env{}, fw, nil)
	const n = 1000
	settleMany(t, l, n)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	failed := testutil.ToFloat64(m.dropped.WithLabelValues(dropWriteFailed))
	full := testutil.ToFloat64(m.dropped.WithLabelValues(dropQueueFull))
	if failed+full != n || failed != float64(fw.calls.Load()) || failed == 0 {
		t.Errorf("write_failed %v + queue_full %v, %d writes: want every line dropped, one write each", failed, full, fw.calls.Load())
	}
	if got := testutil.ToFloat64(m.writeErrors); got != failed {
		t.Errorf("write_errors_total %v, want %v", got, failed)
	}
	if got := testutil.ToFloat64(m.lines); got != 0 {
		t.Errorf("lines_total %v, want 0", got)
	}
}

// shortWriter fails its first write halfway, then works.
type shortWriter struct {
	failed bool
	sb     strings.Builder
}

func (w *shortWriter) Write(p []byte) (int, error) {
	if !w.failed {
		w.failed = true
		w.sb.Write(p[:len(p)/2])
		return len(p) / 2, errors.New("short write")
	}
	return w.sb.Write(p)
}

// After a write that failed halfway, the next line starts on its own, so
// every whole line still parses.
func TestResyncAfterShortWrite(t *testing.T) {
	sw := &shortWriter{}
	l := newLog(Config{}, nil, Env{}, sw, nil)
	settleMany(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(strings.TrimSuffix(sw.sb.String(), "\n"), "\n")
	if len(parts) != 3 {
		t.Fatalf("output %q: want a fragment and two lines", sw.sb.String())
	}
	parseLines(t, parts[1]+"\n"+parts[2])
}
