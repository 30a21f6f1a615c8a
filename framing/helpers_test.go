package framing_test

import "encoding/binary"

// The helpers below encode frames by hand from the wire facts, so the tests
// check the parser against the protocol rather than against itself.

// tag is one tagged field of a header's tagged-field buffer.
type tag struct {
	id   uint64
	data []byte
}

// reqHeader is a request header to encode. A nil clientID is written as a
// null string (length -1).
type reqHeader struct {
	key, version int16
	corr         int32
	clientID     []byte
	tags         []tag
}

// appendTags writes a tagged-field buffer: uvarint count, then per field
// uvarint tag, uvarint size and the bytes.
func appendTags(dst []byte, tags []tag) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(tags)))
	for _, t := range tags {
		dst = binary.AppendUvarint(dst, t.id)
		dst = binary.AppendUvarint(dst, uint64(len(t.data)))
		dst = append(dst, t.data...)
	}
	return dst
}

// appendReqHeader writes h as request header version hv (0, 1 or 2).
func appendReqHeader(dst []byte, h reqHeader, hv int) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.corr))
	if hv >= 1 {
		if h.clientID == nil {
			dst = binary.BigEndian.AppendUint16(dst, 0xffff)
		} else {
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.clientID)))
			dst = append(dst, h.clientID...)
		}
	}
	if hv >= 2 {
		dst = appendTags(dst, h.tags)
	}
	return dst
}

// withSize prepends the int32 big-endian size prefix to payload.
func withSize(payload []byte) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(payload)), uint32(len(payload)))
	return append(out, payload...)
}

// requestFrame encodes a whole request frame: size, header, body.
func requestFrame(h reqHeader, hv int, body []byte) []byte {
	return withSize(append(appendReqHeader(nil, h, hv), body...))
}

// responseFrame encodes a whole response frame with header v0 (hv 0) or v1
// (hv 1, followed by tags).
func responseFrame(corr int32, hv int, tags []tag, body []byte) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if hv >= 1 {
		p = appendTags(p, tags)
	}
	return withSize(append(p, body...))
}
