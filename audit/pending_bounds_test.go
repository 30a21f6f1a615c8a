package audit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Lines waiting for their answers are bounded process wide: past
// maxPending, new lines keep a few resources and count the rest, and
// finishing lines gives their bytes back.
func TestPendingLinesBounded(t *testing.T) {
	h := newHarness(t, Defaults())
	req := hugeCreateTopics(2000)
	var held []*Pending
	for h.log.pending.Load() <= maxPending {
		held = append(held, h.log.Begin(testConn, int16(kmsg.CreateTopics), 7, req))
	}
	lean := h.log.Begin(testConn, int16(kmsg.CreateTopics), 7, req)
	if n := len(lean.b.ln.Resources); n == 0 || lean.b.cost > leanLineBytes || lean.b.ln.ResourcesOmitted != 2000-n {
		t.Fatalf("past the bound: %d resources, %d omitted, cost %d; want a lean line", n, lean.b.ln.ResourcesOmitted, lean.b.cost)
	}
	t.Logf("%d full lines pending (%d bytes) before lines turned lean", len(held), h.log.pending.Load())
	for _, p := range held {
		p.Unknown()
	}
	lean.Unknown()
	if got := h.log.pending.Load(); got != 0 {
		t.Fatalf("%d bytes still counted pending after every line finished", got)
	}
	if full := h.log.Begin(testConn, int16(kmsg.CreateTopics), 7, req); len(full.b.ln.Resources) != maxResources {
		t.Fatalf("after the lines finished: %d resources, want full lines again", len(full.b.ln.Resources))
	}
}

// Refusal lines of APIs that change nothing fill at most three quarters
// of the queue: the rest stays for the lines of changes.
func TestRefusalLinesLeaveRoomForChanges(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	defer close(w.release)
	c := Defaults()
	c.Enabled = true
	m := NewMetrics(nil)
	l := newLog(c, m, Env{}, w, nil)
	defer l.Close()
	produce := kmsg.NewPtrProduceRequest()
	for i := 0; i < queueLines; i++ {
		l.BeginRefusal(testConn, int16(kmsg.Produce), 9, produce).Refused("acks", 21, "acks 1")
	}
	dropped := testutil.ToFloat64(m.dropped.WithLabelValues(dropQueueFull))
	if dropped < queueLines/4-1 {
		t.Fatalf("%v refusal lines dropped of %d, want at least a quarter kept free", dropped, queueLines)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{"t"}
	for i := 0; i < queueLines/8; i++ {
		l.Begin(testConn, int16(kmsg.DeleteTopics), 6, del).Unknown()
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues(dropQueueFull)); got != dropped {
		t.Fatalf("change lines dropped (%v -> %v) while refusals filled the queue", dropped, got)
	}
}
