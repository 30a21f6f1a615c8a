package tracing

import (
	"math"
	"time"
)

// RecordBudget is one request's share of the record path's bounds for a
// reader other than the tracer: policy's record conditions. They share
// its mechanism (the process's inflation slots and
// tracing.links.max_decompressed_bytes_per_second), so rules and tracing
// together inflate no more than that rate; but a rule must read every
// legitimate produce, which links may skip, so its bytes per request are
// at least ruleMinBytes and its batches are bounded only by the frame.
type RecordBudget struct{ b inflateBudget }

// ruleMinBytes is the least a rule may inflate for one request: 64 MiB,
// far over what a producer's default 1 MiB request inflates to, and with
// one inflation at a time per two CPUs, a bound on the memory they take.
const ruleMinBytes = 64 << 20

// slotWait is how long a rule's record read waits for an inflation slot:
// failing a producer's batch because another request was inflating at
// that moment would refuse it for nothing it did. The relay runs record
// rules where it may wait (never on the poller).
const slotWait = 2 * time.Second

// RecordBudget starts one request's budget; it works with tracing off.
func (t *Tracer) RecordBudget() *RecordBudget {
	b := &RecordBudget{}
	t.InitRecordBudget(b)
	return b
}

// InitRecordBudget resets b for a new request, so a session can keep one
// and judge request after request without allocating.
func (t *Tracer) InitRecordBudget(b *RecordBudget) {
	if t == nil {
		d := Defaults().Links
		b.b = inflateBudget{bytes: d.MaxDecompressedBytes}
	} else {
		b.b = *t.newBudget()
	}
	b.b.bytes = max(b.b.bytes, ruleMinBytes)
	b.b.batches = math.MaxInt32
	b.b.wait = slotWait
}

// Inflate appends a compressed batch's records section to dst. Past the
// budget it fails with records.ErrOverBudget; when no slot came free in
// time or the process's rate is spent, with an error naming the limit
// (Cut).
func (r *RecordBudget) Inflate(dst []byte, codec int, data []byte) ([]byte, error) {
	return r.b.inflate(dst, codec, data)
}

// Cut names the limit that stopped reading ("" when none did): the
// tracing.links setting, or decoders_busy.
func (r *RecordBudget) Cut() string { return string(r.b.cut) }
