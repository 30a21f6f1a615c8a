package framing

import "encoding/binary"

// Byte offsets inside a whole frame (size prefix included).
const (
	reqKeyOff     = 4
	reqVersionOff = 6
	reqCorrOff    = 8
	reqFixedEnd   = 12
	respCorrOff   = 4
	respFixedEnd  = 8
)

// RequestHeader is the parsed header of a request frame. ClientID aliases
// the frame and is valid only as long as the frame is.
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	ClientID      []byte // nil when null or when the header version is unknown
	// HeaderVersion is 0, 1 or 2, or -1 when kmsg does not know this
	// key/version: then only the fixed fields above are trusted and the
	// frame is relayed opaquely.
	HeaderVersion int8
	// BodyOffset is where the body starts in the frame, or 0 when unknown.
	BodyOffset int
}

// ParseRequestHeader parses the request header at the start of frame.
func ParseRequestHeader(frame []byte) (RequestHeader, error) {
	var h RequestHeader
	if len(frame) < reqFixedEnd {
		return h, malformed("request shorter than its fixed header")
	}
	h.APIKey = int16(binary.BigEndian.Uint16(frame[reqKeyOff:]))
	h.APIVersion = int16(binary.BigEndian.Uint16(frame[reqVersionOff:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[reqCorrOff:]))
	h.HeaderVersion = RequestHeaderVersion(h.APIKey, h.APIVersion)
	if h.HeaderVersion < 0 {
		return h, nil
	}
	off := reqFixedEnd
	if h.HeaderVersion >= 1 {
		if len(frame) < off+2 {
			return h, malformed("client_id length missing")
		}
		n := int(int16(binary.BigEndian.Uint16(frame[off:])))
		off += 2
		switch {
		case n == -1:
		case n < -1 || len(frame) < off+n:
			return h, malformed("client_id length out of range")
		default:
			h.ClientID = frame[off : off+n : off+n]
			off += n
		}
	}
	if h.HeaderVersion >= 2 {
		end, err := skipTags(frame, off)
		if err != nil {
			return h, err
		}
		off = end
	}
	h.BodyOffset = off
	return h, nil
}

// ResponseHeader is the parsed header of a response frame.
type ResponseHeader struct {
	CorrelationID int32
	// BodyOffset is where the body starts, or 0 when the header version is
	// unknown.
	BodyOffset int
}

// ParseResponseHeader parses a response to a request of key/version.
func ParseResponseHeader(frame []byte, key, version int16) (ResponseHeader, error) {
	var h ResponseHeader
	if len(frame) < respFixedEnd {
		return h, malformed("response shorter than its correlation id")
	}
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[respCorrOff:]))
	switch ResponseHeaderVersion(key, version) {
	case 0:
		h.BodyOffset = respFixedEnd
	case 1:
		end, err := skipTags(frame, respFixedEnd)
		if err != nil {
			return h, err
		}
		h.BodyOffset = end
	}
	return h, nil
}

// ResponseCorrelationID reads the correlation id of a response frame, which
// sits at the same offset in every header version.
func ResponseCorrelationID(frame []byte) int32 {
	return int32(binary.BigEndian.Uint32(frame[respCorrOff:]))
}

// SetRequestCorrelationID patches a request frame's correlation id in place.
func SetRequestCorrelationID(frame []byte, id int32) {
	binary.BigEndian.PutUint32(frame[reqCorrOff:], uint32(id))
}

// SetResponseCorrelationID patches a response frame's correlation id in place.
func SetResponseCorrelationID(frame []byte, id int32) {
	binary.BigEndian.PutUint32(frame[respCorrOff:], uint32(id))
}

// skipTags skips a tagged-field buffer starting at off and returns the
// offset after it. Unknown tags are skipped by their declared size.
func skipTags(b []byte, off int) (int, error) {
	count, off, err := uvarint(b, off)
	if err != nil {
		return 0, err
	}
	for i := uint64(0); i < count; i++ {
		if _, off, err = uvarint(b, off); err != nil { // tag
			return 0, err
		}
		var size uint64
		if size, off, err = uvarint(b, off); err != nil {
			return 0, err
		}
		if size > uint64(len(b)-off) {
			return 0, malformed("tagged field longer than frame")
		}
		off += int(size)
	}
	return off, nil
}

func uvarint(b []byte, off int) (uint64, int, error) {
	if off > len(b) {
		return 0, 0, malformed("truncated varint")
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, 0, malformed("bad varint")
	}
	return v, off + n, nil
}
