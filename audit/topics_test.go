package audit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCreateTopicsAssignmentAndValidateOnly(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = true
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "manual", -1, -1
	tp.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2}}, {Partition: 1, Replicas: []int32{2, 3}}}
	req.Topics = []kmsg.CreateTopicsRequestTopic{tp}
	req = wire(t, req, 5)
	p := h.log.Begin(testConn, req.Key(), 5, req)
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Topics = []kmsg.CreateTopicsResponseTopic{{Topic: "manual", ErrorCode: kerr.TopicAlreadyExists.Code, ErrorMessage: ptr("exists")}}
	p.Settle(wireResp(t, resp, 5))
	ln := h.one()
	wantFields(t, "line", ln, map[string]string{"validate_only": "true", "outcome": "error"})
	wantFields(t, "topic", resources(t, ln)[0], map[string]string{
		"num_partitions": "-1", "replication_factor": "-1", "replicas": `{"0":[1,2],"1":[2,3]}`,
		"outcome": "TOPIC_ALREADY_EXISTS", "message": "exists",
	})
}

func TestDeleteTopicsByNameAndID(t *testing.T) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	t.Run("v5 names", func(t *testing.T) {
		h := newHarness(t, Defaults())
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TopicNames = []string{"a", "b"}
		req = wire(t, req, 5)
		p := h.log.Begin(testConn, req.Key(), 5, req)
		resp := kmsg.NewPtrDeleteTopicsResponse()
		resp.Topics = []kmsg.DeleteTopicsResponseTopic{{Topic: ptr("b"), ErrorCode: kerr.TopicAuthorizationFailed.Code}, {Topic: ptr("a")}}
		p.Settle(wireResp(t, resp, 5))
		ln := h.one()
		rs := resources(t, ln)
		wantFields(t, "line", ln, map[string]string{"outcome": "partial"})
		wantFields(t, "a", rs[0], map[string]string{"name": "a", "outcome": "NONE"})
		wantFields(t, "b", rs[1], map[string]string{"name": "b", "outcome": "TOPIC_AUTHORIZATION_FAILED"})
	})
	t.Run("v6 id", func(t *testing.T) {
		h := newHarness(t, Defaults())
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: id}}
		req = wire(t, req, 6)
		p := h.log.Begin(testConn, req.Key(), 6, req)
		resp := kmsg.NewPtrDeleteTopicsResponse()
		resp.Topics = []kmsg.DeleteTopicsResponseTopic{{Topic: ptr("orders"), TopicID: id}}
		p.Settle(wireResp(t, resp, 6))
		r := resources(t, h.one())[0]
		// Kafka prints topic ids in URL-safe base64, unpadded.
		wantFields(t, "by id", r, map[string]string{"id": "AQIDBAUGBwgJCgsMDQ4PEA", "name": "orders", "outcome": "NONE"})
	})
}

func TestCreatePartitionsAndDeleteRecords(t *testing.T) {
	h := newHarness(t, Defaults())
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "orders", Count: 12}}
	cp = wire(t, cp, 3)
	p := h.log.Begin(testConn, cp.Key(), 3, cp)
	cpr := kmsg.NewPtrCreatePartitionsResponse()
	cpr.Topics = []kmsg.CreatePartitionsResponseTopic{{Topic: "orders", ErrorCode: kerr.InvalidPartitions.Code}}
	p.Settle(wireResp(t, cpr, 3))

	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "orders", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 100}, {Partition: 3, Offset: -1}}}}
	dr = wire(t, dr, 2)
	p = h.log.Begin(testConn, dr.Key(), 2, dr)
	drr := kmsg.NewPtrDeleteRecordsResponse()
	drr.Topics = []kmsg.DeleteRecordsResponseTopic{{Topic: "orders", Partitions: []kmsg.DeleteRecordsResponseTopicPartition{{Partition: 0}, {Partition: 3, ErrorCode: kerr.OffsetOutOfRange.Code}}}}
	p.Settle(wireResp(t, drr, 2))

	ls := h.lines()
	if len(ls) != 2 {
		t.Fatalf("%d lines", len(ls))
	}
	wantFields(t, "create partitions", resources(t, ls[0])[0], map[string]string{"count": "12", "outcome": "INVALID_PARTITIONS"})
	wantFields(t, "delete records", ls[1], map[string]string{"api": "DeleteRecords", "outcome": "error"})
	wantFields(t, "delete records", resources(t, ls[1])[0], map[string]string{"offsets": `{"0":100,"3":-1}`, "outcome": "OFFSET_OUT_OF_RANGE"})
}

func TestElectLeaders(t *testing.T) {
	t.Run("topics", func(t *testing.T) {
		h := newHarness(t, Defaults())
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType = 1
		req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "orders", Partitions: []int32{0, 1}}}
		req = wire(t, req, 2)
		p := h.log.Begin(testConn, req.Key(), 2, req)
		resp := kmsg.NewPtrElectLeadersResponse()
		resp.Topics = []kmsg.ElectLeadersResponseTopic{{Topic: "orders", Partitions: []kmsg.ElectLeadersResponseTopicPartition{{Partition: 0}, {Partition: 1}}}}
		p.Settle(wireResp(t, resp, 2))
		ln := h.one()
		wantFields(t, "line", ln, map[string]string{"outcome": "ok"})
		wantFields(t, "orders", resources(t, ln)[0], map[string]string{"election": "unclean", "partitions": "[0,1]", "outcome": "NONE"})
	})
	t.Run("every partition", func(t *testing.T) {
		h := newHarness(t, Defaults())
		req := kmsg.NewPtrElectLeadersRequest()
		req = wire(t, req, 2)
		p := h.log.Begin(testConn, req.Key(), 2, req)
		resp := kmsg.NewPtrElectLeadersResponse()
		resp.Topics = []kmsg.ElectLeadersResponseTopic{
			{Topic: "a", Partitions: []kmsg.ElectLeadersResponseTopicPartition{{Partition: 0}}},
			{Topic: "b", Partitions: []kmsg.ElectLeadersResponseTopicPartition{{Partition: 0, ErrorCode: kerr.ElectionNotNeeded.Code}}},
		}
		p.Settle(wireResp(t, resp, 2))
		ln := h.one()
		rs := resources(t, ln)
		if len(rs) != 1 {
			t.Fatalf("resources %v, want the one all_topics", rs)
		}
		wantFields(t, "all", rs[0], map[string]string{"type": "all_topics", "election": "preferred", "outcome": "ELECTION_NOT_NEEDED"})
	})
}

func TestAlterPartitionAssignments(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "orders", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{
		{Partition: 0, Replicas: []int32{4, 5, 6}}, {Partition: 1}, // a null list cancels
	}}}
	req = wire(t, req, 0)
	p := h.log.Begin(testConn, req.Key(), 0, req)
	resp := kmsg.NewPtrAlterPartitionAssignmentsResponse()
	resp.ErrorCode = kerr.NotController.Code
	p.Settle(wireResp(t, resp, 0))
	ln := h.one()
	wantFields(t, "line", ln, map[string]string{"api": "AlterPartitionAssignments", "outcome": "error", "error": "NOT_CONTROLLER"})
	wantFields(t, "orders", resources(t, ln)[0], map[string]string{"replicas": `{"0":[4,5,6],"1":null}`, "outcome": "NOT_CONTROLLER"})
}

func TestAlterReplicaLogDirs(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	req.Dirs = []kmsg.AlterReplicaLogDirsRequestDir{
		{Dir: "/data/a", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "orders", Partitions: []int32{0}}}},
		{Dir: "/data/b", Topics: []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "audit", Partitions: []int32{1, 2}}}},
	}
	req = wire(t, req, 2)
	p := h.log.Begin(testConn, req.Key(), 2, req)
	resp := kmsg.NewPtrAlterReplicaLogDirsResponse()
	resp.Topics = []kmsg.AlterReplicaLogDirsResponseTopic{
		{Topic: "orders", Partitions: []kmsg.AlterReplicaLogDirsResponseTopicPartition{{Partition: 0}}},
		{Topic: "audit", Partitions: []kmsg.AlterReplicaLogDirsResponseTopicPartition{{Partition: 1}, {Partition: 2, ErrorCode: kerr.LogDirNotFound.Code}}},
	}
	p.Settle(wireResp(t, resp, 2))
	rs := resources(t, h.one())
	wantFields(t, "a", rs[0], map[string]string{"dir": "/data/a", "name": "orders", "partitions": "[0]", "outcome": "NONE"})
	wantFields(t, "b", rs[1], map[string]string{"dir": "/data/b", "name": "audit", "partitions": "[1,2]", "outcome": "LOG_DIR_NOT_FOUND"})
}
