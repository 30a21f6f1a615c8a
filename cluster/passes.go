package cluster

import "github.com/twmb/franz-go/pkg/kmsg"

// In cluster mode no real broker or controller address may reach the
// application: responses that name them are rewritten (Carries), and
// every other API must be known to name none. The APIs below answer with
// controllers' or voters' addresses kproxy does not front (KRaft quorum
// APIs, KIP-853's endpoints), so they are refused and left out of
// ApiVersions; so is any key kmsg does not know, whose layout kproxy
// cannot read (fail closed, like topic rules).
var namesUnfronted = map[int16]bool{
	int16(kmsg.Vote):             true,
	int16(kmsg.BeginQuorumEpoch): true,
	int16(kmsg.EndQuorumEpoch):   true,
	int16(kmsg.DescribeQuorum):   true,
	int16(kmsg.FetchSnapshot):    true,
	int16(kmsg.UpdateRaftVoter):  true,
}

// Passes reports whether a request with key may be relayed in cluster
// mode: its answer either names no broker address or is rewritten.
func Passes(key int16) bool {
	if Carries(key) {
		return true
	}
	return !namesUnfronted[key] && kmsg.ResponseForKey(key) != nil
}

// Refused are the keys kmsg knows that cluster mode refuses, to be left
// out of ApiVersions (keys kmsg does not know are left out as unknown).
func Refused() []int16 {
	var keys []int16
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		if kmsg.ResponseForKey(k) != nil && !Passes(k) {
			keys = append(keys, k)
		}
	}
	return keys
}
