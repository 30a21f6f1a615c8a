package framing

import "encoding/binary"

// EncodeRack appends rack as a Fetch request's rack_id is encoded at
// version: an int16 length before v12, a compact length from v12.
func EncodeRack(dst []byte, rack string, version int16) []byte {
	if version >= 12 {
		dst = binary.AppendUvarint(dst, uint64(len(rack))+1)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(rack)))
	}
	return append(dst, rack...)
}
