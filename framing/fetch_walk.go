package framing

// Fetch requests and responses read field by field, without decoding a
// body or a record: what kproxy needs of every Fetch (the rack id to
// fill, the offsets and high watermarks consumer lag is measured from)
// must cost no allocation and no copy.

// FetchRequestInfo is what a Fetch request says of itself.
type FetchRequestInfo struct {
	Isolation    int8  // 0 read_uncommitted, 1 read_committed
	SessionID    int32 // KIP-227 fetch session; 0 before v7
	SessionEpoch int32 // -1 (or 0 before v7): a full request
	// RackOffset and RackLen are where rack_id's encoding is in the
	// frame (v11+), RackEmpty whether the client left it empty.
	RackOffset, RackLen int
	RackEmpty           bool
}

// Full reports whether the request lists every partition the consumer
// fetches, replacing any session state: no session (epoch -1, or a
// version before sessions) or a new one (epoch 0).
func (i FetchRequestInfo) Full() bool { return i.SessionEpoch <= 0 }

// FetchPartition is one partition a Fetch request names. Topic aliases
// the frame (nil from v13, which names topics by TopicID).
type FetchPartition struct {
	Topic     []byte
	TopicID   [16]byte
	Partition int32
	Offset    int64 // fetch_offset; -1 for a forgotten partition
	Forgotten bool  // in forgotten_topics_data: leaves the session
}

// WalkFetchRequest walks the Fetch request in frame (h its parsed
// header), calling visit (when not nil) for each partition it fetches and
// each it forgets. ok is false for another key, a version kproxy does
// not know or a body that does not parse to its end; visit may have been
// called for partitions before the fault.
func WalkFetchRequest(frame []byte, h RequestHeader, visit func(FetchPartition)) (info FetchRequestInfo, ok bool) {
	if h.APIKey != KeyFetch || h.BodyOffset <= 0 || !Known(KeyFetch, h.APIVersion) {
		return info, false
	}
	v := h.APIVersion
	c := cursor{b: frame, off: h.BodyOffset, flex: v >= 12}
	if v <= 14 {
		c.skip(4) // replica_id, a tag from v15
	}
	c.skip(4 + 4) // max_wait_ms, min_bytes
	if v >= 3 {
		c.skip(4) // max_bytes
	}
	if v >= 4 {
		info.Isolation = int8(c.int8())
	}
	if v >= 7 {
		info.SessionID, info.SessionEpoch = c.int32(), c.int32()
	} else {
		info.SessionEpoch = -1
	}
	var p FetchPartition
	for topics := c.array(); topics > 0 && !c.bad; topics-- {
		p.Topic, p.TopicID = c.topic(v >= 13)
		for parts := c.array(); parts > 0 && !c.bad; parts-- {
			p.Partition = c.int32()
			if v >= 9 {
				c.skip(4) // current_leader_epoch
			}
			p.Offset = c.int64()
			if v >= 12 {
				c.skip(4) // last_fetched_epoch
			}
			if v >= 5 {
				c.skip(8) // log_start_offset
			}
			c.skip(4) // partition_max_bytes
			c.tags()
			if visit != nil && !c.bad {
				visit(p)
			}
		}
		c.tags()
	}
	if v >= 7 {
		p = FetchPartition{Offset: -1, Forgotten: true}
		for forgotten := c.array(); forgotten > 0 && !c.bad; forgotten-- {
			p.Topic, p.TopicID = c.topic(v >= 13)
			for parts := c.array(); parts > 0 && !c.bad; parts-- {
				p.Partition = c.int32()
				if visit != nil && !c.bad {
					visit(p)
				}
			}
			c.tags()
		}
	}
	if v >= 11 {
		info.RackOffset = c.off
		n := c.length()
		c.skip(max(n, 0))
		info.RackLen, info.RackEmpty = c.off-info.RackOffset, n <= 0
	}
	c.tags() // the request's own: then the frame must end
	if c.bad || c.off != len(frame) {
		return FetchRequestInfo{}, false
	}
	return info, true
}

// FetchedPartition is one partition of a Fetch response. Topic aliases
// the frame (nil from v13).
type FetchedPartition struct {
	Topic            []byte
	TopicID          [16]byte
	Partition        int32
	ErrorCode        int16
	HighWatermark    int64
	LastStableOffset int64 // -1 before v4
	// Records is how many bytes of record batches it carries, and
	// FirstTimestamp the first batch's timestamp in milliseconds (its
	// base timestamp, or its max timestamp when the broker set log
	// append time), -1 with no whole batch.
	Records        int
	FirstTimestamp int64
}

// WalkFetchResponse walks the Fetch response in frame, an answer to a
// request of version, calling visit for each partition. Records are
// never decoded: only the first batch's header is read. ok is false for
// a version kproxy does not know or a body that does not parse.
func WalkFetchResponse(frame []byte, version int16, visit func(FetchedPartition)) bool {
	if !Known(KeyFetch, version) {
		return false
	}
	h, err := ParseResponseHeader(frame, KeyFetch, version)
	if err != nil || h.BodyOffset <= 0 {
		return false
	}
	c := cursor{b: frame, off: h.BodyOffset, flex: version >= 12}
	if version >= 1 {
		c.skip(4) // throttle_time_ms
	}
	if version >= 7 {
		c.skip(2 + 4) // error_code, session_id
	}
	var p FetchedPartition
	for topics := c.array(); topics > 0 && !c.bad; topics-- {
		p.Topic, p.TopicID = c.topic(version >= 13)
		for parts := c.array(); parts > 0 && !c.bad; parts-- {
			p.Partition, p.ErrorCode, p.HighWatermark = c.int32(), int16(c.int16()), c.int64()
			p.LastStableOffset = -1
			if version >= 4 {
				p.LastStableOffset = c.int64()
			}
			if version >= 5 {
				c.skip(8) // log_start_offset
			}
			if version >= 4 {
				for aborted := c.array(); aborted > 0 && !c.bad; aborted-- {
					c.skip(8 + 8) // producer_id, first_offset
					c.tags()
				}
			}
			if version >= 11 {
				c.skip(4) // preferred_read_replica
			}
			n := c.bytesLen()
			p.Records, p.FirstTimestamp = max(n, 0), -1
			if n > 0 && !c.bad {
				p.FirstTimestamp = firstBatchTimestamp(c.b[c.off : c.off+n])
			}
			c.skip(max(n, 0))
			c.tags()
			if !c.bad {
				visit(p)
			}
		}
		c.tags()
	}
	return !c.bad
}

// firstBatchTimestamp is the timestamp of the first record batch
// (magic 2) in b, -1 when b does not start with a whole batch header.
func firstBatchTimestamp(b []byte) int64 {
	const (
		magicOff, attrOff, baseTSOff, maxTSOff, headerLen = 16, 21, 27, 35, 61
		logAppendTime                                     = 1 << 3
	)
	if len(b) < headerLen || b[magicOff] != 2 {
		return -1
	}
	c := cursor{b: b, off: baseTSOff}
	ts := c.int64()
	if (int16(b[attrOff])<<8|int16(b[attrOff+1]))&logAppendTime != 0 {
		c.off = maxTSOff
		ts = c.int64()
	}
	return ts
}
