package tracing

import "time"

// RecordBudget is one request's share of the record path's bounds
// (tracing.links.max_decompressed_bytes, _batches and _per_second, and
// the process's inflation slots) for a reader other than the tracer:
// policy's record conditions. Both read through the same bounds, so a
// rule cannot be made to inflate what tracing would refuse to.
type RecordBudget struct{ b inflateBudget }

// RecordBudget starts one request's budget. It works with tracing off:
// the bounds are the tracing.links settings, defaults included.
func (t *Tracer) RecordBudget() *RecordBudget {
	if t == nil {
		d := Defaults().Links
		return &RecordBudget{inflateBudget{bytes: d.MaxDecompressedBytes, batches: d.MaxDecompressedBatches, wait: slotWait}}
	}
	b := t.newBudget()
	b.wait = slotWait
	return &RecordBudget{*b}
}

// slotWait is how long a rule's record read waits for an inflation slot:
// failing a producer's batch because another request was inflating at
// that moment would refuse it for nothing it did. The relay runs record
// rules where it may wait (never on the poller).
const slotWait = 2 * time.Second

// Inflate appends a compressed batch's records section to dst. Past the
// budget it fails with records.ErrOverBudget; when the budget allows no
// more batches or no slot is free, with an error naming the limit (Cut).
func (r *RecordBudget) Inflate(dst []byte, codec int, data []byte) ([]byte, error) {
	return r.b.inflate(dst, codec, data)
}

// Cut names the limit that stopped reading ("" when none did): the
// tracing.links setting, or decoders_busy.
func (r *RecordBudget) Cut() string { return string(r.b.cut) }
