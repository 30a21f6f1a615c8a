package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/kproxy/kproxy/records"
)

// inflateBudget is what one request may spend inflating compressed batches
// to read their records' headers: tracing.links.max_decompressed_bytes and
// max_decompressed_batches. A hostile produce of small batches that each
// inflate to megabytes then costs a bounded amount, whatever it holds.
type inflateBudget struct {
	bytes   int          // inflated bytes left
	batches int          // compressed batches left to open
	rate    *inflateRate // the process's bytes per second; nil: unbounded

	inflated int      // bytes the decoders gave
	cut      cutCause // why reading stopped short, if a limit stopped it
	// wait is how long open waits for an inflation slot; 0: never (the
	// tracer's links are best effort, a rule's record conditions are not).
	wait time.Duration
}

// newBudget is one request's share of the record path's bounds.
func (t *Tracer) newBudget() *inflateBudget {
	return &inflateBudget{bytes: t.s.Links.MaxDecompressedBytes, batches: t.s.Links.MaxDecompressedBatches, rate: t.inflateRate}
}

// cutCause names the limit that stopped reading a request's records: the
// value of the kproxy_trace_links_truncated_total "limit" label.
type cutCause string

const (
	cutBytes   cutCause = "max_decompressed_bytes"
	cutBatches cutCause = "max_decompressed_batches"
	cutBusy    cutCause = "decoders_busy" // every inflation slot was taken
	cutRate    cutCause = "max_decompressed_bytes_per_second"
)

// recordContexts returns up to max distinct span contexts found in the
// traceparent headers of the produced batches, and whether every traced
// record was read (false when a compressed batch was skipped or cut short,
// or a record was malformed). Compressed batches are read only with a
// budget (nil: skipped), and not at all once it is spent.
func recordContexts(batches [][]byte, max int, b *inflateBudget) (found []trace.SpanContext, complete bool) {
	complete = true
	var scratch []byte // inflated records, reused batch after batch
	prop := propagation.TraceContext{}
	for _, blob := range batches {
		records.EachBatch(blob, func(batch []byte) bool {
			body := batch[records.HeaderSize:]
			if codec := records.CodecOf(batch); codec != 0 {
				var err error
				scratch, err = b.inflate(scratch[:0], codec, body)
				if err != nil {
					complete = false
				}
				if err != nil && err != records.ErrOverBudget {
					return true // not read, or damaged: the next batch may be fine
				}
				// A batch cut at the budget still gives the records before
				// the cut; the cut record reads as truncated.
				body = scratch
			}
			count := int(int32(binary.BigEndian.Uint32(batch[records.CountOff:])))
			err := records.EachHeader(body, count, "traceparent", func(_ int, v []byte) bool {
				ctx := prop.Extract(context.Background(), propagation.MapCarrier{"traceparent": string(v)})
				if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !hasTrace(found, sc) {
					found = append(found, sc)
				}
				return len(found) < max
			})
			if err != nil {
				complete = false
			}
			return len(found) < max
		})
		if len(found) >= max {
			break
		}
	}
	return found, complete
}

// errNotRead says a compressed batch was skipped: no budget (decompression
// off), the budget spent, or no inflation slot free.
var errNotRead = errors.New("compressed batch not read")

// inflate appends a compressed batch's records to dst within the budget.
// Past the budget it returns the records up to it and errOverBudget; a
// nil budget reads nothing.
func (b *inflateBudget) inflate(dst []byte, codec int, data []byte) ([]byte, error) {
	if b == nil {
		return dst, errNotRead
	}
	grant := b.open()
	if grant == 0 {
		return dst, errNotRead
	}
	out, err := records.Inflate(dst, codec, data, grant)
	n := len(out) - len(dst)
	b.close(grant, n)
	if err == records.ErrOverBudget {
		b.cut = cutBytes
		if grant < b.bytes+n {
			b.cut = cutRate // the rate granted less than the request had left
		}
	}
	return out, err
}

// open admits one compressed batch: the bytes it may inflate to, with a
// decoder slot held until close; 0 when it may not be opened, b.cut then
// naming the limit. Every use of the record path (links, injection)
// admits batches here, so they share one set of bounds.
func (b *inflateBudget) open() int {
	switch {
	case b.cut != "":
		return 0 // spent: no more batches are opened
	case b.batches <= 0:
		b.cut = cutBatches
		return 0
	case !records.WaitSlot(b.wait):
		b.cut = cutBusy
		return 0
	}
	grant := b.bytes
	if b.rate != nil {
		if grant = b.rate.take(b.bytes, time.Now()); grant == 0 {
			records.GiveSlot()
			b.cut = cutRate
			return 0
		}
	}
	b.batches--
	return grant
}

// close gives back the slot open took, charges what the batch inflated
// to, and returns to the rate what it granted beyond that.
func (b *inflateBudget) close(granted, used int) {
	records.GiveSlot()
	b.inflated += used
	b.bytes -= used
	if b.rate != nil && granted > used {
		b.rate.giveBack(granted - used)
	}
}

func hasTrace(s []trace.SpanContext, sc trace.SpanContext) bool {
	for _, x := range s {
		if x.Equal(sc) {
			return true
		}
	}
	return false
}
