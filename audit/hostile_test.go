package audit

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func hugeCreateTopics(n int) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = make([]kmsg.CreateTopicsRequestTopic, n)
	for i := range req.Topics {
		req.Topics[i] = kmsg.CreateTopicsRequestTopic{Topic: fmt.Sprintf("t-%06d", i), NumPartitions: 1, ReplicationFactor: 1,
			Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: ptr("1")}}}
	}
	return req
}

// A CreateTopics naming 100,000 topics costs a line of 1000 resources and
// a count of the rest, in memory bounded by the line's limits whatever
// the request's size: about 0.8 MB (under 1.5 MiB asserted), a small part
// of the decoded request itself, and as many allocations as for 2000.
func TestHugeRequestIsBounded(t *testing.T) {
	h := newHarness(t, Defaults())
	req := hugeCreateTopics(100_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p := h.log.Begin(testConn, req.Key(), 5, req)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 3<<19 {
		t.Errorf("Begin of 100,000 topics allocated %d bytes, want under 1.5 MiB", got)
	}
	smallReq := hugeCreateTopics(2000)
	allocs := testing.AllocsPerRun(3, func() { h.log.BeginRefusal(testConn, req.Key(), 5, req) })
	small := testing.AllocsPerRun(3, func() { h.log.BeginRefusal(testConn, req.Key(), 5, smallReq) })
	if allocs > small {
		t.Errorf("Begin of 100,000 topics: %v allocations, of 2000: %v; want the same bound", allocs, small)
	}

	// Refusing every topic, and an answer for every topic, stay cheap.
	for i := 0; i < len(req.Topics); i += 2 {
		p.Refuse(req.Topics[i].Topic, "r", "refused")
	}
	resp := kmsg.NewPtrCreateTopicsResponse()
	for i := range req.Topics {
		resp.Topics = append(resp.Topics, kmsg.CreateTopicsResponseTopic{Topic: req.Topics[i].Topic})
	}
	p.Settle(resp)
	ln := h.one()
	rs := resources(t, ln)
	wantFields(t, "line", ln, map[string]string{"resources_omitted": "99000", "outcome": "partial"})
	if len(rs) != maxResources {
		t.Fatalf("%d resources, want %d", len(rs), maxResources)
	}
	wantFields(t, "first", rs[0], map[string]string{"name": "t-000000", "outcome": "POLICY_VIOLATION"})
	wantFields(t, "second", rs[1], map[string]string{"name": "t-000001", "outcome": "NONE"})
	if n := len(h.buf.String()); n > maxLineBytes {
		t.Errorf("line of %d bytes, over maxLineBytes", n)
	}
}

// Every list inside a resource, and every string, is bounded too.
func TestHugeResourceIsBounded(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrDeleteRecordsRequest()
	tp := kmsg.DeleteRecordsRequestTopic{Topic: strings.Repeat("n", 10*maxString)}
	for i := range 50_000 {
		tp.Partitions = append(tp.Partitions, kmsg.DeleteRecordsRequestTopicPartition{Partition: int32(i), Offset: 1})
	}
	req.Topics = []kmsg.DeleteRecordsRequestTopic{tp}
	p := h.log.Begin(testConn, req.Key(), 2, req)
	resp := kmsg.NewPtrDeleteRecordsResponse()
	resp.Topics = []kmsg.DeleteRecordsResponseTopic{{Topic: tp.Topic, Partitions: []kmsg.DeleteRecordsResponseTopicPartition{{ErrorCode: kerr.PolicyViolation.Code}}}}
	p.Settle(resp) // matched under its cut name
	r := resources(t, h.one())[0]
	if name := field(r, "name"); len(name) > maxString+32 {
		t.Errorf("name kept %d bytes", len(name))
	}
	wantFields(t, "topic", r, map[string]string{"omitted": "49000", "outcome": "POLICY_VIOLATION"})
	if n := len(r["offsets"].(map[string]any)); n != maxItems {
		t.Errorf("%d offsets kept, want %d", n, maxItems)
	}
}
