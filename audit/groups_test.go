package audit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g1", "g2"}
	req = wire(t, req, 2)
	p := h.log.Begin(testConn, req.Key(), 2, req)
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Groups = []kmsg.DeleteGroupsResponseGroup{{Group: "g1", ErrorCode: kerr.NonEmptyGroup.Code}, {Group: "g2", ErrorCode: kerr.GroupIDNotFound.Code}}
	p.Settle(wireResp(t, resp, 2))
	ln := h.one()
	wantFields(t, "line", ln, map[string]string{"outcome": "error"})
	rs := resources(t, ln)
	wantFields(t, "g1", rs[0], map[string]string{"type": "group", "name": "g1", "outcome": "NON_EMPTY_GROUP"})
	wantFields(t, "g2", rs[1], map[string]string{"outcome": "GROUP_ID_NOT_FOUND"})
}

func TestOffsetDelete(t *testing.T) {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "orders-consumers"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "orders", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
	t.Run("per partition", func(t *testing.T) {
		h := newHarness(t, Defaults())
		r := wire(t, req, 0)
		p := h.log.Begin(testConn, r.Key(), 0, r)
		resp := kmsg.NewPtrOffsetDeleteResponse()
		resp.Topics = []kmsg.OffsetDeleteResponseTopic{{Topic: "orders", Partitions: []kmsg.OffsetDeleteResponseTopicPartition{{Partition: 0}, {Partition: 1, ErrorCode: kerr.GroupSubscribedToTopic.Code}}}}
		p.Settle(wireResp(t, resp, 0))
		ln := h.one()
		rs := resources(t, ln)
		wantFields(t, "line", ln, map[string]string{"outcome": "partial"})
		wantFields(t, "group", rs[0], map[string]string{"type": "group", "name": "orders-consumers", "outcome": "NONE"})
		wantFields(t, "topic", rs[1], map[string]string{"type": "topic", "name": "orders", "partitions": "[0,1]", "outcome": "GROUP_SUBSCRIBED_TO_TOPIC"})
	})
	t.Run("group error", func(t *testing.T) {
		h := newHarness(t, Defaults())
		r := wire(t, req, 0)
		p := h.log.Begin(testConn, r.Key(), 0, r)
		resp := kmsg.NewPtrOffsetDeleteResponse()
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		p.Settle(wireResp(t, resp, 0))
		ln := h.one()
		wantFields(t, "line", ln, map[string]string{"outcome": "error", "error": "GROUP_AUTHORIZATION_FAILED"})
		for _, r := range resources(t, ln) {
			wantFields(t, "resource", r, map[string]string{"outcome": "GROUP_AUTHORIZATION_FAILED"})
		}
	})
}

func TestShareGroupOffsets(t *testing.T) {
	h := newHarness(t, Defaults())
	alter := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	alter.GroupID = "share-g"
	alter.Topics = []kmsg.AlterShareGroupOffsetsRequestTopic{{Topic: "orders", Partitions: []kmsg.AlterShareGroupOffsetsRequestTopicPartition{{Partition: 2, StartOffset: 50}}}}
	alter = wire(t, alter, 0)
	p := h.log.Begin(testConn, alter.Key(), 0, alter)
	ar := kmsg.NewPtrAlterShareGroupOffsetsResponse()
	ar.Topics = []kmsg.AlterShareGroupOffsetsResponseTopic{{Topic: "orders", Partitions: []kmsg.AlterShareGroupOffsetsResponseTopicPartition{{Partition: 2}}}}
	p.Settle(wireResp(t, ar, 0))

	del := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	del.GroupID = "share-g"
	del.Topics = []kmsg.DeleteShareGroupOffsetsRequestTopic{{Topic: "orders"}, {Topic: "audit"}}
	del = wire(t, del, 0)
	p = h.log.Begin(testConn, del.Key(), 0, del)
	dr := kmsg.NewPtrDeleteShareGroupOffsetsResponse()
	dr.Topics = []kmsg.DeleteShareGroupOffsetsResponseTopic{{Topic: "audit", ErrorCode: kerr.UnknownTopicOrPartition.Code}, {Topic: "orders"}}
	p.Settle(wireResp(t, dr, 0))

	ls := h.lines()
	if len(ls) != 2 {
		t.Fatalf("%d lines", len(ls))
	}
	wantFields(t, "alter", resources(t, ls[0])[1], map[string]string{"name": "orders", "offsets": `{"2":50}`, "outcome": "NONE"})
	wantFields(t, "alter", ls[0], map[string]string{"outcome": "ok"})
	rs := resources(t, ls[1])
	wantFields(t, "delete group", rs[0], map[string]string{"type": "group", "outcome": "NONE"})
	wantFields(t, "delete orders", rs[1], map[string]string{"outcome": "NONE"})
	wantFields(t, "delete audit", rs[2], map[string]string{"outcome": "UNKNOWN_TOPIC_OR_PARTITION"})
}
