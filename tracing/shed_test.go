package tracing

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// stuckExporter holds every export until release is closed, like a
// collector that has stopped answering.
type stuckExporter struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (e *stuckExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *stuckExporter) Shutdown(context.Context) error { return nil }

// While the export queue is full, Start drops the span before decoding the
// body or building anything, counts it as dropped, and starts spans again
// once the queue drains.
func TestStartShedsWhileTheQueueIsFull(t *testing.T) {
	clearOTEL(t)
	c := Defaults()
	c.MaxQueueSize = 4
	exp := &stuckExporter{release: make(chan struct{})}
	tr, err := NewWithExporter(c, "test", exp, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	var once sync.Once
	release := func() { once.Do(func() { close(exp.release) }) }
	t.Cleanup(release) // runs first: a failed test must not hold Shutdown

	for i := range c.MaxQueueSize {
		s := tr.Start(testPeer, bodyOf(t, produceFrame(int32(i))), 1, 10, time.Now())
		if s == nil {
			t.Fatalf("span %d not started with room in the queue", i)
		}
		tr.End(s, 0, 9, produceRespFrame(int32(i), 0))
	}
	body := bodyOf(t, produceFrame(9))
	if s := tr.Start(testPeer, body, 1, 10, time.Now()); s != nil {
		t.Fatal("span started with the export queue full")
	}
	if body.Decoded() {
		t.Error("body decoded for a span that was dropped")
	}
	if got := testutil.ToFloat64(tr.m.dropped); got != 1 {
		t.Errorf("dropped %v, want 1", got)
	}

	release() // the collector answers again
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := tr.Start(testPeer, bodyOf(t, produceFrame(10)), 1, 10, time.Now()); s == nil {
		t.Fatal("no span started after the queue drained")
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	if exp.got != c.MaxQueueSize {
		t.Errorf("exported %d spans, want %d", exp.got, c.MaxQueueSize)
	}
}
