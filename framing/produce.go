package framing

import "encoding/binary"

// ProduceAcks reads the acks field of a Produce request body (the bytes after
// the request header) without decoding the rest. Produce with acks=0 gets no
// response, so the caller must not wait for one.
func ProduceAcks(body []byte, version int16) (int16, error) {
	if !Known(KeyProduce, version) {
		return 0, malformed("produce version unknown to kproxy: acks layout not known")
	}
	off := 0
	if version >= 3 { // transactional_id, a nullable string
		if Flexible(KeyProduce, version) {
			n, end, err := uvarint(body, 0)
			if err != nil {
				return 0, err
			}
			off = end
			if n > 0 {
				if n-1 > uint64(len(body)-off) {
					return 0, malformed("transactional_id longer than frame")
				}
				off += int(n - 1)
			}
		} else {
			if len(body) < 2 {
				return 0, malformed("transactional_id length missing")
			}
			n := int(int16(binary.BigEndian.Uint16(body)))
			off = 2
			if n > 0 {
				off += n
			} else if n < -1 {
				return 0, malformed("transactional_id length out of range")
			}
		}
	}
	if len(body) < off+2 {
		return 0, malformed("acks missing")
	}
	return int16(binary.BigEndian.Uint16(body[off:])), nil
}
