package cluster

import (
	"encoding/binary"
	"errors"
)

// errShort is what the hand-written walkers return on any truncated or
// inconsistent field: the caller only needs to know the frame is unusable.
var errShort = errors.New("cluster: response truncated or malformed")

// reader walks a flexible Kafka body without copying or allocating. Only
// the few primitives the Fetch/Produce skipper needs are here; the rest of
// the protocol is left to kmsg.
type reader struct {
	b   []byte
	off int
	bad bool
}

func (r *reader) skip(n int) {
	if r.bad || n < 0 || n > len(r.b)-r.off {
		r.bad = true
		return
	}
	r.off += n
}

// uvarint reads an unsigned varint. Nearly every one in a response (a
// count, a length, a tag) is below 128, one byte: that case is inlined, as
// it is most of what the Produce/Fetch walk does. It does not look at bad:
// a read after a failure is still bounded, and every caller checks bad
// before trusting what it read.
func (r *reader) uvarint() uint64 {
	if r.off < len(r.b) {
		if c := r.b[r.off]; c < 0x80 {
			r.off++
			return uint64(c)
		}
	}
	return r.uvarintLong()
}

func (r *reader) uvarintLong() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.off += n
	return v
}

func (r *reader) int32() int32 {
	if r.bad || len(r.b)-r.off < 4 {
		r.bad = true
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b[r.off:]))
	r.off += 4
	return v
}

// compactLen reads a compact length (uvarint N+1, 0 = null) and returns
// N, or -1 for null. Lengths beyond the remaining bytes are rejected here
// so that no caller loops on a forged count.
func (r *reader) compactLen() int {
	var u uint64
	if r.off < len(r.b) && r.b[r.off] < 0x80 { // uvarint's common case, without its call
		u = uint64(r.b[r.off])
		r.off++
	} else {
		u = r.uvarintLong()
	}
	if r.bad || u > uint64(len(r.b)-r.off)+1 {
		r.bad = true
		return 0
	}
	return int(u) - 1
}

// skipCompactBytes skips a compact (nullable) string or bytes field.
func (r *reader) skipCompactBytes() {
	off := r.off
	if off < len(r.b) && r.b[off] < 0x80 { // compactLen's common case, without its call
		r.off++
		if n := int(r.b[off]) - 1; n > 0 {
			r.skip(n)
		}
		return
	}
	if n := r.compactLen(); n > 0 {
		r.skip(n)
	}
}

// compactString reads a non-null compact string, aliasing the frame.
func (r *reader) compactString() string {
	n := r.compactLen()
	if r.bad || n < 0 {
		r.bad = true
		return ""
	}
	s := string(r.b[r.off : r.off+n])
	r.off += n
	return s
}

// skipTags skips a tagged-field section: uvarint count, then per field
// uvarint tag, uvarint size and the bytes. An empty section, one zero
// byte, is the common case and is inlined.
func (r *reader) skipTags() {
	if off := r.off; off < len(r.b) && r.b[off] == 0 {
		r.off++
		return
	}
	r.skipSomeTags()
}

func (r *reader) skipSomeTags() {
	n := r.uvarint()
	for i := uint64(0); i < n && !r.bad; i++ {
		r.uvarint()
		size := r.uvarint()
		if size > uint64(len(r.b)-r.off) {
			r.bad = true
			return
		}
		r.skip(int(size))
	}
}

// array reads a compact array's element count; null counts as zero. Each
// element takes at least minElem bytes, which bounds forged counts.
func (r *reader) array(minElem int) int {
	var n int
	if r.off < len(r.b) && r.b[r.off] < 0x80 { // compactLen's common case, without its call
		n = int(r.b[r.off]) - 1
		r.off++
	} else {
		n = r.compactLen()
	}
	if n <= 0 || r.bad {
		return 0
	}
	if n > (len(r.b)-r.off)/minElem {
		r.bad = true
		return 0
	}
	return n
}
