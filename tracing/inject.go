// This file holds trace context injection (tracing.propagation.inject):
// a sampled Produce's records that carry no traceparent get one naming
// the Produce span, so the consumer's side can link to it.

package tracing

import (
	"encoding/hex"
	"errors"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/records"
)

// Why a batch was left as it came, the reason label of
// kproxy_records_skipped_total (besides the budget's cutCause values).
const (
	skipMalformed = "malformed"       // not a whole batch, or its CRC or records do not hold
	skipControl   = "control"         // a transaction marker: never changed
	skipTooBig    = "max_batch_bytes" // the header would grow it past tracing.propagation.max_batch_bytes
	skipEncode    = "encode_failed"   // the codec could not compress it again
)

// Uses of the record path, the use label of kproxy_records_skipped_total.
const (
	useInject       = "inject"
	useProduceLinks = "produce_links"
	useFetchLinks   = "fetch_links"
)

// Injects reports whether sampled Produce requests get traceparent
// headers (tracing.propagation.inject); such requests are changed, and
// are relayed where they may wait, never on the poller.
func (t *Tracer) Injects() bool { return t.On() && t.s.Propagation.Inject }

// Inject returns the Produce frame (size prefix included, h its parsed
// header) with a traceparent naming span s added to each record that has
// none, or frame itself when nothing changes: no span, every record
// already traced, or a bound that left the batches as they came (each
// counted). The new frame is freshly allocated: the caller relays it in
// frame's place.
func (t *Tracer) Inject(s *Span, frame []byte, h framing.RequestHeader) []byte {
	if s == nil || !t.Injects() || h.APIKey != framing.KeyProduce {
		return frame
	}
	tid, sid := s.fixIDs()
	var tp [55]byte // 00-<32 hex>-<16 hex>-01
	copy(tp[:], "00-")
	hex.Encode(tp[3:35], tid[:])
	tp[35] = '-'
	hex.Encode(tp[36:52], sid[:])
	copy(tp[52:], "-01")
	var state []byte
	if s.parent.IsValid() {
		if ts := s.parent.TraceState().String(); ts != "" {
			state = []byte(ts)
		}
	}
	bufs := injectBufPool.Get().(*injectBufs)
	defer bufs.put()
	in := injector{t: t, s: s, traceparent: tp[:], tracestate: state,
		budget: *t.newBudget(), bufs: bufs}
	// Sized once for the headers added, so the new frame is one allocation.
	dst := make([]byte, 0, len(frame)+s.records*(headerGrowth+len(state))+64)
	out, changed, err := records.RewriteProduce(dst, frame, h, in.batch)
	t.m.inflated.Add(float64(in.budget.inflated))
	if err != nil || !changed {
		if err != nil {
			t.m.skipped.WithLabelValues(useInject, skipMalformed).Inc()
		}
		return frame
	}
	s.injected = in.injected
	return out
}

// headerGrowth is about what a traceparent header adds to a record: its
// key, its 55-byte value and their lengths, and the record length's
// varint growing.
const headerGrowth = 72

// injectBufs are the inflated and re-encoded records of a batch, reused
// batch after batch and, through injectBufPool, request after request.
type injectBufs struct{ scratch, raw []byte }

var injectBufPool = sync.Pool{New: func() any { return new(injectBufs) }}

// maxPooledInject bounds the buffers kept for the next request, so one
// large produce does not pin its size in the pool.
const maxPooledInject = 1 << 20

func (b *injectBufs) put() {
	if cap(b.scratch) > maxPooledInject || cap(b.raw) > maxPooledInject {
		return
	}
	injectBufPool.Put(b)
}

// injector changes one request's batches, within one budget.
type injector struct {
	t                       *Tracer
	s                       *Span
	traceparent, tracestate []byte
	budget                  inflateBudget
	bufs                    *injectBufs
	injected                int
}

// batch is a records.Change: the batch with traceparent added to its
// untraced records, or nil to send it as it came.
func (in *injector) batch(_ string, _ int32, raw []byte) []byte {
	if len(raw) < records.HeaderSize {
		return nil
	}
	if records.CodecOf(raw) == 0 && allTraced(raw) {
		return nil // nothing to add: no decode at all
	}
	limit := len(raw) // an uncompressed batch needs no grant
	compressed := records.CodecOf(raw) != 0
	if compressed {
		if limit = in.budget.open(); limit == 0 {
			in.skip(string(in.budget.cut))
			return nil
		}
	}
	b, scratch, err := records.Decode(raw, in.bufs.scratch, limit)
	in.bufs.scratch = scratch
	if compressed {
		in.budget.close(limit, len(scratch))
	}
	if err != nil {
		in.skip(decodeReason(err, &in.budget))
		return nil
	}
	// Every record's new headers come from one array: copies, since the
	// decoded headers may share theirs.
	total := 0
	for i := range b.Records {
		total += len(b.Records[i].Headers) + 2
	}
	slab := make([]kmsg.Header, 0, total)
	n := 0
	for i := range b.Records {
		r := &b.Records[i]
		if hasHeader(r.Headers, "traceparent") {
			continue // a user's creation context is never changed
		}
		at := len(slab)
		slab = append(slab, r.Headers...)
		slab = append(slab, kmsg.Header{Key: "traceparent", Value: in.traceparent})
		if in.tracestate != nil && !hasHeader(r.Headers, "tracestate") {
			slab = append(slab, kmsg.Header{Key: "tracestate", Value: in.tracestate})
		}
		r.Headers = slab[at:len(slab):len(slab)]
		n++
	}
	if n == 0 {
		return nil
	}
	grow := n * (headerGrowth + len(in.tracestate))
	section := len(raw) - records.HeaderSize
	if compressed {
		section = len(scratch)
	}
	in.bufs.raw = slices.Grow(in.bufs.raw[:0], section+grow)
	out, raw2, err := b.Encode(make([]byte, 0, len(raw)+grow), in.bufs.raw)
	in.bufs.raw = raw2
	switch {
	case err != nil:
		in.skip(skipEncode)
		return nil
	case len(out) > in.t.s.Propagation.MaxBatchBytes && len(out) > len(raw):
		in.skip(skipTooBig)
		return nil
	}
	in.injected += n
	return out
}

func (in *injector) skip(reason string) {
	in.t.m.skipped.WithLabelValues(useInject, reason).Inc()
}

// decodeReason names why records.Decode refused a batch.
func decodeReason(err error, b *inflateBudget) string {
	switch {
	case errors.Is(err, records.ErrControl):
		return skipControl
	case errors.Is(err, records.ErrOverBudget):
		b.cut = cutBytes
		return string(cutBytes)
	}
	return skipMalformed
}

// allTraced reports whether every record of an uncompressed batch has a
// traceparent header (false when a record does not read).
func allTraced(batch []byte) bool {
	count := records.RecordCount(batch)
	traced, last := 0, -1
	err := records.EachHeader(batch[records.HeaderSize:], count, "traceparent", func(i int, _ []byte) bool {
		if i != last { // a record may carry the header twice
			traced, last = traced+1, i
		}
		return true
	})
	return err == nil && traced >= count
}

func hasHeader(hs []kmsg.Header, key string) bool {
	for _, h := range hs {
		if h.Key == key {
			return true
		}
	}
	return false
}
