package relay

import (
	"encoding/binary"

	"github.com/kproxy/kproxy/framing"
)

// Rack is proxy.client_rack as a Fetch request carries it (KIP-392),
// encoded once in both of rack_id's forms: brokers running
// RackAwareReplicaSelector then send the client to a replica in its own
// zone. Sessions share it read-only.
type Rack struct {
	plain, compact []byte // int16 length (Fetch v11), compact length (v12+)
}

// NewRack encodes id, or returns nil for "" (no rack: Fetch requests pass
// as they are).
func NewRack(id string) *Rack {
	if id == "" {
		return nil
	}
	return &Rack{plain: framing.EncodeRack(nil, id, 11), compact: framing.EncodeRack(nil, id, 12)}
}

func (r *Rack) encoding(version int16) []byte {
	if version >= 12 {
		return r.compact
	}
	return r.plain
}

// addFetch adds a Fetch request to up, with the listener's rack in its
// rack_id (v11+) when the client left it empty; a client's own rack is
// never replaced. info is the request's walk when walked (the lag table
// walked it already), else it is walked here. The frame is spliced around
// the field, not copied: its size prefix is rewritten in place and up
// gets the head, the rack and the tail, which the drivers write as one.
// Nothing is allocated.
func (s *Session) addFetch(frame []byte, h framing.RequestHeader, info framing.FetchRequestInfo, walked bool, up *Batch) {
	if !walked {
		info, walked = framing.WalkFetchRequest(frame, h, nil)
	}
	if !walked || h.APIVersion < 11 || !info.RackEmpty {
		up.Add(frame)
		return
	}
	off, n := info.RackOffset, info.RackLen
	enc := s.env.Rack.encoding(h.APIVersion)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-framing.SizeLen-n+len(enc)))
	up.Add(frame[:off])
	up.Add(enc)
	up.Add(frame[off+n:])
	s.env.Metrics.RackFilled.Inc()
}
