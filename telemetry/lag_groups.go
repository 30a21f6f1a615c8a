package telemetry

import "github.com/twmb/franz-go/pkg/kmsg"

// GroupKeys are the API keys whose requests name the consumer group of
// the client that sends them: kproxy learns each client id's group from
// them, as the Fetch requests the lag is read from name none.
var GroupKeys = [...]int16{
	int16(kmsg.OffsetCommit), int16(kmsg.OffsetFetch), int16(kmsg.JoinGroup), int16(kmsg.Heartbeat),
	int16(kmsg.LeaveGroup), int16(kmsg.SyncGroup), int16(kmsg.ConsumerGroupHeartbeat),
}

// NamesGroup reports whether requests of key name a consumer group.
func NamesGroup(key int16) bool {
	for _, k := range GroupKeys {
		if k == key {
			return true
		}
	}
	return false
}

// GroupOf is the consumer group a decoded request names, "" for none (or
// an OffsetFetch naming several, as only admin tools send).
func GroupOf(req kmsg.Request) string {
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		return r.Group
	case *kmsg.OffsetFetchRequest:
		if len(r.Groups) == 1 {
			return r.Groups[0].Group
		}
		if len(r.Groups) == 0 {
			return r.Group
		}
	case *kmsg.JoinGroupRequest:
		return r.Group
	case *kmsg.HeartbeatRequest:
		return r.Group
	case *kmsg.LeaveGroupRequest:
		return r.Group
	case *kmsg.SyncGroupRequest:
		return r.Group
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return r.Group
	}
	return ""
}
