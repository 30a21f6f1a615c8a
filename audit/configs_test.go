package audit

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAlterConfigs(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrAlterConfigsRequest()
	req.Resources = []kmsg.AlterConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders", Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: ptr("1000")}, {Name: "cleanup.policy"}}},
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1", Configs: []kmsg.AlterConfigsRequestResourceConfig{{Name: "log.retention.hours", Value: ptr("48")}}},
	}
	req = wire(t, req, 2)
	p := h.log.Begin(testConn, req.Key(), 2, req)
	resp := kmsg.NewPtrAlterConfigsResponse()
	// The broker may answer in another order: entries match by type and name.
	resp.Resources = []kmsg.AlterConfigsResponseResource{
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "1", ErrorCode: kerr.ClusterAuthorizationFailed.Code},
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "orders"},
	}
	p.Settle(wireResp(t, resp, 2))
	ln := h.one()
	rs := resources(t, ln)
	wantFields(t, "line", ln, map[string]string{"outcome": "partial"})
	wantFields(t, "topic", rs[0], map[string]string{"type": "topic", "name": "orders", "configs": `{"cleanup.policy":null,"retention.ms":"1000"}`, "outcome": "NONE", "ops": ""})
	wantFields(t, "broker", rs[1], map[string]string{"type": "broker", "name": "1", "outcome": "CLUSTER_AUTHORIZATION_FAILED"})
}

func TestIncrementalAlterConfigsOps(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeBrokerLogger, ResourceName: "2", Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "kafka.server", Op: kmsg.IncrementalAlterConfigOpSet, Value: ptr("DEBUG")}}},
		{ResourceType: kmsg.ConfigResourceTypeGroupConfig, ResourceName: "g", Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{
			{Name: "consumer.session.timeout.ms", Op: kmsg.IncrementalAlterConfigOpDelete},
			{Name: "x.list", Op: kmsg.IncrementalAlterConfigOpAppend, Value: ptr("a")},
			{Name: "y.list", Op: kmsg.IncrementalAlterConfigOpSubtract, Value: ptr("b")},
		}},
		{ResourceType: kmsg.ConfigResourceTypeClientMetrics, ResourceName: "m", Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "interval.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: ptr("1000")}}},
	}
	req = wire(t, req, 1)
	p := h.log.Begin(testConn, req.Key(), 1, req)
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	for _, r := range req.Resources {
		resp.Resources = append(resp.Resources, kmsg.IncrementalAlterConfigsResponseResource{ResourceType: r.ResourceType, ResourceName: r.ResourceName})
	}
	p.Settle(wireResp(t, resp, 1))
	ln := h.one()
	rs := resources(t, ln)
	wantFields(t, "line", ln, map[string]string{"outcome": "ok"})
	wantFields(t, "logger", rs[0], map[string]string{"type": "broker_logger", "configs": `{"kafka.server":"DEBUG"}`, "ops": `{"kafka.server":"set"}`})
	wantFields(t, "group", rs[1], map[string]string{"type": "group", "name": "g",
		"ops": `{"consumer.session.timeout.ms":"delete","x.list":"append","y.list":"subtract"}`})
	wantFields(t, "metrics", rs[2], map[string]string{"type": "client_metrics", "outcome": "NONE"})
}

func TestAlterClientQuotas(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{
		{
			Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: ptr("alice")}, {Type: "client-id", Name: ptr("app")}},
			Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1048576}, {Key: "request_percentage", Remove: true}},
		},
		{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user"}}, Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: "consumer_byte_rate", Value: 2.5e6}}},
	}
	req = wire(t, req, 1)
	p := h.log.Begin(testConn, req.Key(), 1, req)
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	resp.Entries = []kmsg.AlterClientQuotasResponseEntry{
		{Entity: []kmsg.AlterClientQuotasResponseEntryEntity{{Type: "user"}}, ErrorCode: kerr.InvalidRequest.Code},
		// The entity's parts in another order still match.
		{Entity: []kmsg.AlterClientQuotasResponseEntryEntity{{Type: "client-id", Name: ptr("app")}, {Type: "user", Name: ptr("alice")}}},
	}
	p.Settle(wireResp(t, resp, 1))
	rs := resources(t, h.one())
	wantFields(t, "alice", rs[0], map[string]string{
		"type": "quota", "entity": `{"client-id":"app","user":"alice"}`,
		"configs": `{"producer_byte_rate":"1048576","request_percentage":null}`,
		"ops":     `{"producer_byte_rate":"set","request_percentage":"remove"}`, "outcome": "NONE",
	})
	wantFields(t, "default user", rs[1], map[string]string{"entity": `{"user":null}`, "configs": `{"consumer_byte_rate":"2500000"}`, "outcome": "INVALID_REQUEST"})
}
