package cluster

import (
	"encoding/binary"
	"fmt"
)

// endpoint is one entry of the KIP-951 NodeEndpoints tag of Produce and
// Fetch: node_id, host, port, rack (nullable), and its own tags, which are
// kept as raw bytes so that nothing a broker adds later is lost.
type endpoint struct {
	Broker
	rack []byte // compact nullable string, encoded as received
	tags []byte // tagged-field section, encoded as received
}

// readEndpoints decodes the whole content of tag 0; trailing bytes are an
// error like a short read, since the tag's size must match its content.
func readEndpoints(b []byte) ([]endpoint, error) {
	r := reader{b: b}
	n := r.array(7)
	eps := make([]endpoint, 0, n)
	for i := 0; i < n && !r.bad; i++ {
		var e endpoint
		e.NodeID = r.int32()
		e.Host = r.compactString()
		e.Port = r.int32()
		e.EndpointType = EndpointBroker
		s := r.off
		r.skipCompactBytes()
		e.rack = b[s:r.off]
		s = r.off
		r.skipTags()
		e.tags = b[s:r.off]
		eps = append(eps, e)
	}
	if r.bad || r.off != len(b) {
		return nil, fmt.Errorf("cluster: NodeEndpoints tag: %w", errShort)
	}
	return eps, nil
}

// appendEndpoints encodes eps as a compact array, with the (rewritten)
// host and port and the rest as received.
func appendEndpoints(dst []byte, eps []endpoint) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(eps))+1)
	for _, e := range eps {
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.NodeID))
		dst = binary.AppendUvarint(dst, uint64(len(e.Host))+1)
		dst = append(dst, e.Host...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.Port))
		dst = append(dst, e.rack...)
		dst = append(dst, e.tags...)
	}
	return dst
}
