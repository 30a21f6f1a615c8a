package audit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// A Produce refused for one topic is audited through BeginRefusal: the
// refused topic keeps kproxy's code, the other takes the broker's, and no
// record byte is written.
func TestRefusedProduceIsAuditedWithoutRecords(t *testing.T) {
	h := newHarness(t, Defaults())
	if h.log.Audits(framing.KeyProduce) {
		t.Fatal("Produce audited as a change of cluster state")
	}
	if p := h.log.Begin(testConn, framing.KeyProduce, 9, nil); p != nil {
		t.Fatal("Begin returned a Pending for Produce")
	}
	const payload = "RECORD-PAYLOAD-NEVER-LOGGED"
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TransactionID = -1, ptr("txn-1")
	req.Topics = []kmsg.ProduceRequestTopic{
		{Topic: "big", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte(payload)}}},
		{Topic: "ok", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 1, Records: []byte(payload)}, {Partition: 2, Records: []byte(payload)}}},
	}
	p := h.log.BeginRefusal(testConn, framing.KeyProduce, 9, req)
	p.RefuseCode("big", "batch-size", kerr.MessageTooLarge.Code, "batch over 1 MiB")
	resp := kmsg.NewPtrProduceResponse()
	resp.Topics = []kmsg.ProduceResponseTopic{
		{Topic: "big", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 0, ErrorCode: kerr.MessageTooLarge.Code}}},
		{Topic: "ok", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 1}, {Partition: 2}}},
	}
	p.Settle(wireResp(t, resp, 9))
	ln := h.one()
	notIn(t, []byte(h.buf.String()), payload)
	wantFields(t, "line", ln, map[string]string{"api": "Produce", "outcome": "partial"})
	rs := resources(t, ln)
	// The answer has no entry of its own for the transactional id.
	wantFields(t, "txn", rs[0], map[string]string{"type": "transactional_id", "name": "txn-1", "outcome": ""})
	wantFields(t, "big", rs[1], map[string]string{"name": "big", "partitions": "[0]", "outcome": "MESSAGE_TOO_LARGE", "rule": "batch-size", "message": "batch over 1 MiB"})
	wantFields(t, "ok", rs[2], map[string]string{"name": "ok", "partitions": "[1,2]", "outcome": "NONE"})
}

// A group API refused whole: the group is named, its member metadata is
// not.
func TestRefusedJoinGroup(t *testing.T) {
	h := newHarness(t, Defaults())
	const meta = "PROTOCOL-METADATA-NEVER-LOGGED"
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.ProtocolType = "payments", "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(meta)}}
	p := h.log.BeginRefusal(testConn, req.Key(), 9, req)
	p.Refused("only-payments", kerr.GroupAuthorizationFailed.Code, "rule only-payments: not allowed")
	p.Settle(kmsg.NewPtrJoinGroupResponse()) // after the finish: nothing
	ln := h.one()
	notIn(t, []byte(h.buf.String()), meta)
	wantFields(t, "line", ln, map[string]string{"api": "JoinGroup", "outcome": "refused", "error": "GROUP_AUTHORIZATION_FAILED",
		"rule": "only-payments", "message": "rule only-payments: not allowed"})
	wantFields(t, "group", resources(t, ln)[0], map[string]string{"type": "group", "name": "payments", "outcome": "GROUP_AUTHORIZATION_FAILED", "rule": "only-payments"})
}

// Topics of other APIs come from framing.EachTopic, partitions grouped;
// a response with no error anywhere makes every resource NONE, one with
// an error marks the line.
func TestGenericTopicsAndSettle(t *testing.T) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Topics = []kmsg.ListOffsetsRequestTopic{
		{Topic: "a", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0}, {Partition: 1}}},
		{Topic: "b", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 4}}},
	}
	t.Run("ok", func(t *testing.T) {
		h := newHarness(t, Defaults())
		p := h.log.BeginRefusal(testConn, req.Key(), 7, req)
		p.Refuse("b", "no-b", "b is closed")
		resp := kmsg.NewPtrListOffsetsResponse()
		resp.Topics = []kmsg.ListOffsetsResponseTopic{{Topic: "a", Partitions: []kmsg.ListOffsetsResponseTopicPartition{{Partition: 0}}}}
		p.Settle(resp)
		ln := h.one()
		rs := resources(t, ln)
		wantFields(t, "line", ln, map[string]string{"outcome": "partial"})
		wantFields(t, "a", rs[0], map[string]string{"name": "a", "partitions": "[0,1]", "outcome": "NONE"})
		wantFields(t, "b", rs[1], map[string]string{"name": "b", "partitions": "[4]", "outcome": "POLICY_VIOLATION", "rule": "no-b"})
	})
	t.Run("broker error", func(t *testing.T) {
		h := newHarness(t, Defaults())
		p := h.log.BeginRefusal(testConn, req.Key(), 7, req)
		resp := kmsg.NewPtrListOffsetsResponse()
		resp.Topics = []kmsg.ListOffsetsResponseTopic{{Topic: "a", Partitions: []kmsg.ListOffsetsResponseTopicPartition{{Partition: 0, ErrorCode: kerr.NotLeaderForPartition.Code}}}}
		p.Settle(resp)
		ln := h.one()
		wantFields(t, "line", ln, map[string]string{"outcome": "error", "error": "NOT_LEADER_FOR_PARTITION"})
		wantFields(t, "a", resources(t, ln)[0], map[string]string{"outcome": ""})
	})
}
