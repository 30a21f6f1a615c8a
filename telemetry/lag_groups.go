package telemetry

import "github.com/twmb/franz-go/pkg/kmsg"

// GroupOf is the consumer group a consumer's decoded group request
// (framing.GroupAPI) names, "" for none: another group API (an admin's
// DescribeGroups), or an OffsetFetch naming several, as only admin tools
// send. kproxy learns each client id's group from them, as the Fetch
// requests the lag is read from name none.
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
