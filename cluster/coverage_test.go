package cluster

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// addressFields walks a kmsg type and returns the paths (Type.Field.Sub)
// of every field that looks like it carries a network address: Host,
// Port, or anything named like an endpoint or listener.
func addressFields(t reflect.Type, path string, out map[string]bool, depth int) {
	if depth > 8 {
		return
	}
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "UnknownTags" {
			continue
		}
		p := path + "." + f.Name
		n := strings.ToLower(f.Name)
		if strings.Contains(n, "host") || n == "port" || strings.Contains(n, "endpoint") || strings.Contains(n, "listener") || strings.Contains(n, "address") {
			out[p] = true
		}
		addressFields(f.Type, p, out, depth+1)
	}
}

// handledFields are the address fields Rewrite rewrites.
var handledFields = map[string]bool{
	"MetadataResponse.Brokers.Host":               true,
	"MetadataResponse.Brokers.Port":               true,
	"FindCoordinatorResponse.Host":                true,
	"FindCoordinatorResponse.Port":                true,
	"FindCoordinatorResponse.Coordinators.Host":   true,
	"FindCoordinatorResponse.Coordinators.Port":   true,
	"DescribeClusterResponse.Brokers.Host":        true,
	"DescribeClusterResponse.Brokers.Port":        true,
	"DescribeClusterResponse.EndpointType":        true, // passed to the Mapper
	"ProduceResponse.Brokers.Host":                true,
	"ProduceResponse.Brokers.Port":                true,
	"FetchResponse.Brokers.Host":                  true,
	"FetchResponse.Brokers.Port":                  true,
	"ShareFetchResponse.NodeEndpoints":            true,
	"ShareFetchResponse.NodeEndpoints.Host":       true,
	"ShareFetchResponse.NodeEndpoints.Port":       true,
	"ShareAcknowledgeResponse.NodeEndpoints":      true,
	"ShareAcknowledgeResponse.NodeEndpoints.Host": true,
	"ShareAcknowledgeResponse.NodeEndpoints.Port": true,
}

// raftOnly: KRaft controller-to-controller APIs are never sent by a client,
// so their responses never pass through kproxy to one.
const raftOnly = "KRaft controller-to-controller API"

// allowedFields look like addresses but are not broker addresses a client
// could dial to bypass kproxy; each says why it is left alone.
var allowedFields = map[string]string{
	"BeginQuorumEpochResponse.NodeEndpoints":                                   raftOnly,
	"BeginQuorumEpochResponse.NodeEndpoints.Host":                              raftOnly,
	"BeginQuorumEpochResponse.NodeEndpoints.Port":                              raftOnly,
	"EndQuorumEpochResponse.NodeEndpoints":                                     raftOnly,
	"EndQuorumEpochResponse.NodeEndpoints.Host":                                raftOnly,
	"EndQuorumEpochResponse.NodeEndpoints.Port":                                raftOnly,
	"FetchSnapshotResponse.NodeEndpoints":                                      raftOnly,
	"FetchSnapshotResponse.NodeEndpoints.Host":                                 raftOnly,
	"FetchSnapshotResponse.NodeEndpoints.Port":                                 raftOnly,
	"VoteResponse.NodeEndpoints":                                               raftOnly,
	"VoteResponse.NodeEndpoints.Host":                                          raftOnly,
	"VoteResponse.NodeEndpoints.Port":                                          raftOnly,
	"UpdateRaftVoterResponse.CurrentLeader.Host":                               raftOnly,
	"UpdateRaftVoterResponse.CurrentLeader.Port":                               raftOnly,
	"DescribeQuorumResponse.Nodes.Listeners":                                   "controller quorum listeners, shown by admin tools and never dialled by clients; controllers have no broker listener to map them to (see the report: the lead may decide to rewrite them)",
	"DescribeQuorumResponse.Nodes.Listeners.Host":                              "as DescribeQuorumResponse.Nodes.Listeners",
	"DescribeQuorumResponse.Nodes.Listeners.Port":                              "as DescribeQuorumResponse.Nodes.Listeners",
	"ConsumerGroupDescribeResponse.Groups.Members.ClientHost":                  "the member client's own address as the broker saw it, not a broker's (issue 16: do not touch ClientHost)",
	"DescribeGroupsResponse.Groups.Members.ClientHost":                         "as ConsumerGroupDescribeResponse ClientHost",
	"ShareGroupDescribeResponse.Groups.Members.ClientHost":                     "as ConsumerGroupDescribeResponse ClientHost",
	"StreamsGroupDescribeResponse.Groups.Members.ClientHost":                   "as ConsumerGroupDescribeResponse ClientHost",
	"DeleteACLsResponse.Results.MatchingACLs.Host":                             "ACL host pattern (a principal's client host), not an address to dial",
	"DescribeACLsResponse.Resources.ACLs.Host":                                 "ACL host pattern (a principal's client host), not an address to dial",
	"StreamsGroupDescribeResponse.Groups.Members.UserEndpoint":                 "a Kafka Streams application's own endpoint (interactive queries), not a broker",
	"StreamsGroupDescribeResponse.Groups.Members.UserEndpoint.Host":            "as Streams UserEndpoint",
	"StreamsGroupDescribeResponse.Groups.Members.UserEndpoint.Port":            "as Streams UserEndpoint",
	"StreamsGroupHeartbeatResponse.PartitionsByUserEndpoint":                   "as Streams UserEndpoint",
	"StreamsGroupHeartbeatResponse.PartitionsByUserEndpoint.UserEndpoint":      "as Streams UserEndpoint",
	"StreamsGroupHeartbeatResponse.PartitionsByUserEndpoint.UserEndpoint.Host": "as Streams UserEndpoint",
	"StreamsGroupHeartbeatResponse.PartitionsByUserEndpoint.UserEndpoint.Port": "as Streams UserEndpoint",
	"StreamsGroupHeartbeatResponse.EndpointInformationEpoch":                   "an epoch number of the Streams endpoint map, no address",
}

// TestEveryAddressFieldHandled fails when a kmsg response type has a field
// that looks like an address and is neither rewritten nor allowed with a
// reason, so a franz-go upgrade that adds one cannot leak silently.
func TestEveryAddressFieldHandled(t *testing.T) {
	found := map[string]bool{}
	for key := int16(0); key < 1000; key++ {
		r := kmsg.ResponseForKey(key)
		if r == nil {
			continue
		}
		rt := reflect.TypeOf(r).Elem()
		addressFields(rt, rt.Name(), found, 0)
	}
	var bad []string
	for p := range found {
		if !handledFields[p] && allowedFields[p] == "" {
			bad = append(bad, p)
		}
	}
	sort.Strings(bad)
	for _, p := range bad {
		t.Errorf("%s looks like an address and is neither rewritten nor allowed", p)
	}
	for p := range handledFields {
		if !found[p] {
			t.Errorf("handled field %s no longer exists in kmsg", p)
		}
	}
	for p := range allowedFields {
		if !found[p] {
			t.Errorf("allowed field %s no longer exists in kmsg", p)
		}
	}
}
