package records

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// Change is what a rewrite does to one batch of a partition: it returns
// the batch to send instead, or nil to send it as it came.
type Change func(topic string, partition int32, batch []byte) []byte

// RewriteProduce rebuilds a Produce request frame (size prefix included,
// h its parsed header) whose batches change replaces. The body is encoded
// again in the request's own version, so every length at every level is
// right (each partition's records length, compact lengths in flexible
// versions, the frame's size prefix); the header bytes are kept as they
// came, and so is every batch change leaves alone. It appends the new
// frame to dst and reports whether anything changed: when nothing did,
// dst is returned as it was and the frame goes as it came.
func RewriteProduce(dst, frame []byte, h framing.RequestHeader, change Change) ([]byte, bool, error) {
	if h.APIKey != framing.KeyProduce || h.BodyOffset == 0 {
		return dst, false, fmt.Errorf("not a Produce request kproxy can read")
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(h.APIVersion)
	if err := req.ReadFrom(frame[h.BodyOffset:]); err != nil {
		return dst, false, fmt.Errorf("decoding Produce v%d: %w", h.APIVersion, err)
	}
	changed := false
	for ti := range req.Topics {
		t := &req.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if out, ok := rewriteField(p.Records, func(b []byte) []byte { return change(t.Topic, p.Partition, b) }); ok {
				p.Records, changed = out, true
			}
		}
	}
	if !changed {
		return dst, false, nil
	}
	start := len(dst)
	dst = append(dst, frame[:h.BodyOffset]...)
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-framing.SizeLen))
	return dst, true, nil
}

// rewriteField returns a records field with each batch replaced by what
// change gives (nil: kept), and whether any was; bytes after the last
// whole batch are kept as they are.
func rewriteField(field []byte, change func([]byte) []byte) ([]byte, bool) {
	var (
		out     []byte
		changed bool
		at      int
	)
	EachBatch(field, func(b []byte) bool {
		if nb := change(b); nb != nil {
			if !changed {
				out = append(make([]byte, 0, len(field)+len(nb)-len(b)), field[:at]...)
				changed = true
			}
			out = append(out, nb...)
		} else if changed {
			out = append(out, b...)
		}
		at += len(b)
		return true
	})
	if !changed {
		return field, false
	}
	return append(out, field[at:]...), true
}
