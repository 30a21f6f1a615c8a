package framing

import (
	"encoding/binary"
	"time"
)

// ShortenFetchWait takes held off the max_wait_ms of the Fetch request in
// frame (h its parsed header), in place, and returns the wait it leaves
// (never below 0). kproxy calls it for a Fetch it had to hold before
// sending it (a re-authentication first): clients time a Fetch out soon
// after its wait (kafka-go gives up at its MaxWait, having asked the
// broker for MaxWait less a quarter of it), so a Fetch held and then sent
// with its whole wait would be answered after the client gave up. ok is
// false, and the frame untouched, when the frame is not a Fetch of a
// version kproxy knows or is too short.
func ShortenFetchWait(frame []byte, h RequestHeader, held time.Duration) (left int32, ok bool) {
	if h.APIKey != KeyFetch || h.BodyOffset <= 0 || !Known(KeyFetch, h.APIVersion) {
		return 0, false
	}
	off := h.BodyOffset
	if h.APIVersion <= 14 { // replica_id precedes it until v15 made it a tag
		off += 4
	}
	if len(frame) < off+4 {
		return 0, false
	}
	wait := int64(int32(binary.BigEndian.Uint32(frame[off:])))
	left64 := max(wait-held.Milliseconds(), 0)
	binary.BigEndian.PutUint32(frame[off:], uint32(int32(left64)))
	return int32(left64), true
}
