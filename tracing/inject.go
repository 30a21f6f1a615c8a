// This file holds trace context injection (tracing.propagation.inject):
// a sampled Produce's records that carry no traceparent get one naming
// the Produce span, so the consumer's side can link to it.

package tracing

import (
	"encoding/hex"
	"errors"
	"time"

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
	in := injector{t: t, s: s, traceparent: tp[:], tracestate: state,
		budget: inflateBudget{bytes: t.s.Links.MaxDecompressedBytes, batches: t.s.Links.MaxDecompressedBatches, rate: t.inflateRate}}
	out, changed, err := records.RewriteProduce(nil, frame, h, in.batch)
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

// injector changes one request's batches, within one budget.
type injector struct {
	t                       *Tracer
	s                       *Span
	traceparent, tracestate []byte
	budget                  inflateBudget
	scratch, raw            []byte // inflated and re-encoded records, reused batch after batch
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
	limit, reason := in.grant(raw)
	if reason != "" {
		in.skip(reason)
		return nil
	}
	compressed := records.CodecOf(raw) != 0
	b, scratch, err := records.Decode(raw, in.scratch, limit)
	in.scratch = scratch
	if compressed {
		records.GiveSlot()
		in.spent(limit, len(scratch))
	}
	if err != nil {
		in.skip(decodeReason(err, &in.budget))
		return nil
	}
	n := 0
	for i := range b.Records {
		r := &b.Records[i]
		if hasHeader(r.Headers, "traceparent") {
			continue // a user's creation context is never changed
		}
		// Appended to a copy: the decoded headers may share an array.
		hs := make([]kmsg.Header, len(r.Headers), len(r.Headers)+2)
		copy(hs, r.Headers)
		hs = append(hs, kmsg.Header{Key: "traceparent", Value: in.traceparent})
		if in.tracestate != nil && !hasHeader(r.Headers, "tracestate") {
			hs = append(hs, kmsg.Header{Key: "tracestate", Value: in.tracestate})
		}
		r.Headers = hs
		n++
	}
	if n == 0 {
		return nil
	}
	out, raw2, err := b.Encode(nil, in.raw)
	in.raw = raw2
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

// grant is how many bytes a compressed batch may inflate to (the
// request's budget, its batches, the process's rate and a decoder slot,
// as for links), or why it may not be opened. An uncompressed batch needs
// no grant. A compressed one granted holds a decoder slot, which the
// caller gives back.
func (in *injector) grant(raw []byte) (int, string) {
	if records.CodecOf(raw) == 0 {
		return len(raw), ""
	}
	b := &in.budget
	switch {
	case b.cut != "":
		return 0, string(b.cut)
	case b.batches <= 0:
		b.cut = cutBatches
		return 0, string(b.cut)
	case !records.TakeSlot():
		return 0, string(cutBusy) // busy now, not spent: the next batch may find one
	}
	g := b.bytes
	if b.rate != nil {
		if g = b.rate.take(b.bytes, time.Now()); g == 0 {
			records.GiveSlot()
			b.cut = cutRate
			return 0, string(b.cut)
		}
	}
	b.batches--
	return g, ""
}

// spent charges what a batch inflated to against the budget, and gives
// the rate back what it granted beyond that.
func (in *injector) spent(granted, used int) {
	b := &in.budget
	b.inflated += used
	b.bytes -= used
	if b.rate != nil && granted > used {
		b.rate.giveBack(granted - used)
	}
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
