package audit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The line of a CreateTopics with one topic the broker made and one kproxy
// refused is the example of docs/audit.md, field for field.
func TestLineFormat(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrCreateTopicsRequest()
	good := kmsg.NewCreateTopicsRequestTopic()
	good.Topic, good.NumPartitions, good.ReplicationFactor = "team-a.orders", 6, 3
	good.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: ptr("86400000")}}
	bad := kmsg.NewCreateTopicsRequestTopic()
	bad.Topic, bad.NumPartitions, bad.ReplicationFactor = "bad", 1, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{good, bad}
	req = wire(t, req, 7)

	p := h.log.Begin(testConn, req.Key(), 7, req)
	p.Refuse("bad", "topic-standards", "rule topic-standards: replication_factor 1 below min 3")
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Topics = []kmsg.CreateTopicsResponseTopic{{Topic: "team-a.orders"}, {Topic: "bad", ErrorCode: kerr.PolicyViolation.Code}}
	p.Settle(wireResp(t, resp, 7))

	ln := h.one()
	t.Log(h.buf.String())
	wantFields(t, "line", ln, map[string]string{
		"time": "2026-12-03T10:00:00.123Z", "pod": "kproxy-0", "namespace": "kafka",
		"client": "10.0.0.5:53412", "principal": "spiffe://cluster.local/ns/orders/sa/admin",
		"upstream_principal": "svc-orders", "client_id": "orders-admin",
		"api": "CreateTopics", "version": "7", "outcome": "partial",
		"error": "", "rule": "", "resources_omitted": "", "validate_only": "",
	})
	rs := resources(t, ln)
	if len(rs) != 2 {
		t.Fatalf("resources %v, want 2", rs)
	}
	wantFields(t, "good", rs[0], map[string]string{
		"type": "topic", "name": "team-a.orders", "num_partitions": "6", "replication_factor": "3",
		"configs": `{"retention.ms":"86400000"}`, "outcome": "NONE", "rule": "", "message": "",
	})
	wantFields(t, "bad", rs[1], map[string]string{
		"type": "topic", "name": "bad", "outcome": "POLICY_VIOLATION", "rule": "topic-standards",
		"message": "rule topic-standards: replication_factor 1 below min 3",
	})
}
