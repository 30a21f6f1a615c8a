package framing

import "testing"

// The group APIs come from kmsg's own marking, not a list kept here.
func TestGroupAPI(t *testing.T) {
	for _, name := range []string{"JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit",
		"OffsetFetch", "DescribeGroups", "DeleteGroups", "TxnOffsetCommit", "OffsetDelete", "ConsumerGroupHeartbeat"} {
		if k, _ := KeyForName(name); !GroupAPI(k) {
			t.Errorf("%s is not a group API", name)
		}
	}
	for _, name := range []string{"Produce", "Fetch", "Metadata", "CreateTopics", "ApiVersions"} {
		if k, _ := KeyForName(name); GroupAPI(k) {
			t.Errorf("%s is taken for a group API", name)
		}
	}
	if GroupAPI(-1) || GroupAPI(30000) {
		t.Error("an unknown key is taken for a group API")
	}
}
