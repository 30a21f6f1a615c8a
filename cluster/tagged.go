package cluster

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// Highest Produce/Fetch versions kmsg knows; a later version could move
// its fields, so it is refused rather than walked with a guessed layout.
var (
	maxProduce = kmsg.NewPtrProduceResponse().MaxVersion()
	maxFetch   = kmsg.NewPtrFetchResponse().MaxVersion()
)

// rewriteTagged handles Produce and Fetch. Their NodeEndpoints (KIP-951)
// is top-level tag 0, which sits after every partition's records, so the
// body is walked with a skipper that steps over records by their length
// and never looks inside. Versions before the tag existed are returned
// untouched without reading a byte; versions with it cost one walk over
// the array headers, and only a frame with the tag is rebuilt.
func rewriteTagged(frame []byte, key, version int16, m Mapper) ([]byte, []Broker, error) {
	var flexFrom, tagFrom, max int16
	if key == framing.KeyProduce {
		flexFrom, tagFrom, max = 9, 10, maxProduce
	} else {
		flexFrom, tagFrom, max = 12, 16, maxFetch
	}
	if version < tagFrom {
		return frame, nil, nil
	}
	if version > max {
		return nil, nil, fmt.Errorf("cluster: %s v%d is beyond what kmsg v1.15.1 knows; refusing to pass on a layout that may hold broker addresses", kmsg.NameForKey(key), version)
	}
	off, err := bodyOffset(frame, key, version >= flexFrom)
	if err != nil {
		return nil, nil, err
	}
	r := reader{b: frame, off: off}
	if key == framing.KeyProduce {
		skipProduceBody(&r, version)
	} else {
		skipFetchBody(&r, version)
	}
	if r.bad {
		return nil, nil, fmt.Errorf("cluster: walking %s v%d: %w", kmsg.NameForKey(key), version, errShort)
	}
	return rewriteTopTags(frame, r.off, m)
}

// skipFetchBody steps over a flexible (v12+) Fetch response body up to its
// top-level tagged fields.
func skipFetchBody(r *reader, version int16) {
	r.skip(4 + 2 + 4) // throttle_time_ms, error_code, session_id
	for t := r.array(2); t > 0 && !r.bad; t-- {
		if version >= 13 {
			r.skip(16) // topic_id
		} else {
			r.skipCompactBytes() // topic name
		}
		for p := r.array(37); p > 0 && !r.bad; p-- {
			// partition, error_code, high_watermark,
			// last_stable_offset, log_start_offset
			r.skip(4 + 2 + 8 + 8 + 8)
			for a := r.array(17); a > 0 && !r.bad; a-- {
				r.skip(8 + 8) // producer_id, first_offset
				r.skipTags()
			}
			r.skip(4)            // preferred_read_replica
			r.skipCompactBytes() // records, never decoded
			r.skipTags()
		}
		r.skipTags()
	}
}

// skipProduceBody steps over a flexible (v9+) Produce response body up to
// its top-level tagged fields.
func skipProduceBody(r *reader, version int16) {
	for t := r.array(2); t > 0 && !r.bad; t-- {
		if version >= 13 {
			r.skip(16) // topic_id
		} else {
			r.skipCompactBytes() // topic name
		}
		for p := r.array(33); p > 0 && !r.bad; p-- {
			// partition, error_code, base_offset, log_append_time,
			// log_start_offset
			r.skip(4 + 2 + 8 + 8 + 8)
			for e := r.array(3); e > 0 && !r.bad; e-- {
				r.skip(4)            // batch_index
				r.skipCompactBytes() // batch_index_error_message
				r.skipTags()
			}
			r.skipCompactBytes() // error_message
			r.skipTags()
		}
		r.skipTags()
	}
	r.skip(4) // throttle_time_ms
}

// rewriteTopTags reads the top-level tagged fields starting at off, which
// must run to the end of the frame. Without tag 0 the frame is returned as
// it is. With it, the frame up to off is copied, and the tag section is
// re-encoded with tag 0 rewritten and every other tag kept byte for byte.
func rewriteTopTags(frame []byte, off int, m Mapper) ([]byte, []Broker, error) {
	if off == len(frame)-1 && frame[off] == 0 {
		return frame, nil, nil // no tagged field, the common case
	}
	r := reader{b: frame, off: off}
	n := r.uvarint()
	var epStart, epEnd int
	found := false
	for i := uint64(0); i < n && !r.bad; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if r.bad || size > uint64(len(frame)-r.off) {
			r.bad = true
			break
		}
		if tag == 0 {
			found, epStart, epEnd = true, r.off, r.off+int(size)
		}
		r.skip(int(size))
	}
	if r.bad || r.off != len(frame) {
		return nil, nil, fmt.Errorf("cluster: top-level tagged fields: %w", errShort)
	}
	if !found {
		return frame, nil, nil
	}
	eps, err := readEndpoints(frame[epStart:epEnd])
	if err != nil {
		return nil, nil, err
	}
	seen := make([]Broker, len(eps))
	for i := range eps {
		seen[i] = eps[i].Broker
		h, p, err := mapBroker(m, eps[i].Broker)
		if err != nil {
			return nil, nil, err
		}
		eps[i].Host, eps[i].Port = h, p
	}
	tag0 := appendEndpoints(nil, eps)

	out := make([]byte, 0, len(frame)+len(tag0))
	out = append(out, frame[:off]...)
	r = reader{b: frame, off: off}
	n = r.uvarint()
	out = binary.AppendUvarint(out, n)
	for i := uint64(0); i < n; i++ {
		start := r.off
		tag := r.uvarint()
		size := r.uvarint()
		if tag == 0 {
			out = binary.AppendUvarint(out, 0)
			out = binary.AppendUvarint(out, uint64(len(tag0)))
			out = append(out, tag0...)
		} else {
			out = append(out, frame[start:r.off+int(size)]...)
		}
		r.skip(int(size))
	}
	return withSize(out), seen, nil
}
