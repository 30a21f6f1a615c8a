package main

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// group answers coordinator and consumer group requests, or returns nil
// for anything else. Every member is alone in its group: it is the leader,
// gets back the assignment it computes, and commits go nowhere. That is
// enough for a consumer to start fetching from the null broker; it is not
// a group coordinator.
func (b *nullBroker) group(req kmsg.Request) kmsg.Response {
	switch req := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.NodeID, resp.Host, resp.Port = b.cfg.NodeID, b.host, b.port
		for _, k := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, kmsg.FindCoordinatorResponseCoordinator{
				Key: k, NodeID: b.cfg.NodeID, Host: b.host, Port: b.port})
		}
		return resp
	case *kmsg.JoinGroupRequest:
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		member := req.MemberID
		if member == "" {
			member = "kbench-" + strconv.FormatInt(b.members.Add(1), 10)
		}
		resp.Generation, resp.MemberID, resp.LeaderID = 1, member, member
		resp.ProtocolType = kmsg.StringPtr(req.ProtocolType)
		if len(req.Protocols) > 0 {
			p := req.Protocols[0]
			resp.Protocol = kmsg.StringPtr(p.Name)
			resp.Members = []kmsg.JoinGroupResponseMember{{MemberID: member, ProtocolMetadata: p.Metadata}}
		}
		return resp
	case *kmsg.SyncGroupRequest:
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ProtocolType, resp.Protocol = req.ProtocolType, req.Protocol
		for _, a := range req.GroupAssignment {
			if a.MemberID == req.MemberID {
				resp.MemberAssignment = a.MemberAssignment
			}
		}
		return resp
	case *kmsg.HeartbeatRequest:
		return req.ResponseKind()
	case *kmsg.LeaveGroupRequest:
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		for _, m := range req.Members {
			resp.Members = append(resp.Members, kmsg.LeaveGroupResponseMember{MemberID: m.MemberID, InstanceID: m.InstanceID})
		}
		return resp
	case *kmsg.OffsetCommitRequest:
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.OffsetFetchRequest:
		return offsetFetch(req)
	}
	return nil
}

// offsetFetch says no partition has a committed offset (-1), so a consumer
// starts where its reset policy says.
func offsetFetch(req *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	for _, t := range req.Topics {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset = p, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	for _, g := range req.Groups {
		rg := kmsg.OffsetFetchResponseGroup{Group: g.Group}
		for _, t := range g.Topics {
			rt := kmsg.OffsetFetchResponseGroupTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset = p, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}
