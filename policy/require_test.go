package policy

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/batchtest"
)

func n64(n int64) *int64 { return &n }

func TestRequireValidate(t *testing.T) {
	base := func(q *Require, apis ...string) Rule {
		return Rule{Name: "r", Action: ActionReject, Match: Selector{APIs: apis}, Require: q}
	}
	cases := []struct {
		rule Rule
		want string // "" for valid
	}{
		{base(&Require{Partitions: &Range{Min: n64(3), Max: n64(48)}}, "CreateTopics"), ""},
		{base(&Require{Partitions: &Range{Min: n64(50), Max: n64(48)}}, "CreateTopics"), "rules.0.require.partitions: min 50 is above max 48"},
		{base(&Require{Configs: map[string]ConfigRule{"retention.ms": {Min: n64(2), Max: n64(1)}}}, "CreateTopics"), "rules.0.require.configs.retention.ms: min 2 is above max 1"},
		{base(&Require{Configs: map[string]ConfigRule{"retention.ms": {}}}, "AlterConfigs"), "rules.0.require.configs.retention.ms: needs min, max or one_of"},
		{base(&Require{Configs: map[string]ConfigRule{"cleanup.policy": {OneOf: []string{"delete"}, Min: n64(1)}}}, "AlterConfigs"), "one_of and min/max do not go together"},
		{base(&Require{Acks: "2"}, "Produce"), "rules.0.require.acks"},
		{base(&Require{Acks: "0"}, "Produce"), "acks=0 cannot be answered"},
		{base(&Require{Compression: []string{"brotli"}}, "Produce"), `rules.0.require.compression.0: unknown codec "brotli"`},
		{base(&Require{SessionTimeoutMs: &Range{Min: n64(1)}}, "Produce"), "rules.0.require.session_timeout_ms: applies to JoinGroup, and the rule selects none of them"},
		{base(&Require{Acks: "all"}, "CreateTopics"), "require.acks: applies to Produce"},
		{base(&Require{TopicName: "team-["}, "CreateTopics"), "require.topic_name: bad glob"},
		{base(&Require{}, "Produce"), "rules.0.require: names no condition"},
		{Rule{Name: "r", Action: ActionThrottle, Limits: Limits{RequestsPerSecond: 1}, Require: &Require{Acks: "all"}}, "put require and limits in separate rules"},
		{Rule{Name: "r", Action: ActionReject, Match: Selector{ExceptAPIs: []string{"Produce"}}, Require: &Require{Acks: "all"}}, "applies to Produce"},
		{Rule{Name: "r", Action: ActionLog, Require: &Require{Acks: "all", GroupID: "team-*"}}, ""}, // every API selected
		{Rule{Name: "r", Action: ActionReject, Match: Selector{Topics: []string{"orders.*"}}, Require: &Require{GroupID: "team-*"}}, "require.group_id: the group APIs name no topic"},
	}
	for i, c := range cases {
		err := Config{Rules: []Rule{c.rule}}.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("case %d: %v, want valid", i, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("case %d: %v, want %q", i, err, c.want)
		}
	}
}

func TestRequireWarnings(t *testing.T) {
	c := Config{Rules: []Rule{{Name: "r", Action: ActionReject, Match: Selector{APIs: []string{"CreateTopics"}},
		Require: &Require{Configs: map[string]ConfigRule{"retention.ms": {Min: n64(1)}, "retension.ms": {Min: n64(1)}}}}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	w := c.Warnings()
	if len(w) != 1 || !strings.HasPrefix(w[0], "rules.0.require.configs.retension.ms:") {
		t.Fatalf("warnings %q, want one for the misspelt config", w)
	}
}

// Config resources that are not topics, and deletions, are never judged.
func TestRequireConfigsScope(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "ret", Action: ActionReject, Match: Selector{APIs: []string{"IncrementalAlterConfigs"}},
		Require: &Require{Configs: map[string]ConfigRule{"retention.ms": {Min: n64(3600000)}}}})
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
		op   kmsg.IncrementalAlterConfigOp
	}{{kmsg.ConfigResourceTypeBroker, "1", kmsg.IncrementalAlterConfigOpSet}, {kmsg.ConfigResourceTypeTopic, "t", kmsg.IncrementalAlterConfigOpDelete}} {
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = r.typ, r.name
		cf := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cf.Name, cf.Op, cf.Value = "retention.ms", r.op, kmsg.StringPtr("1")
		res.Configs = append(res.Configs, cf)
		req.Resources = append(req.Resources, res)
	}
	if v := request(t, req, "c").check(e, t0); v.Outcome != Pass {
		t.Fatalf("verdict %+v, want pass", v)
	}
}

// The group APIs' whole-request refusals carry the message where the
// response has one.
func TestRequireGroupAnswer(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "groups", Action: ActionReject, Match: Selector{APIs: []string{"ConsumerGroupHeartbeat"}},
		Require: &Require{GroupID: "team-*"}})
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = "rogue"
	c := request(t, req, "c")
	v := c.check(e, t0)
	if v.Outcome != Reject || v.Code != codeInvalidGroupID || !v.Whole {
		t.Fatalf("verdict %+v", v)
	}
	q, _ := c.body.Request()
	resp, ok := RefusalResponse(q, v)
	if !ok {
		t.Fatal("no answer")
	}
	r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	if r.ErrorCode != codeInvalidGroupID || r.ErrorMessage == nil || *r.ErrorMessage != `rule groups: group_id "rogue" does not match "team-*"` {
		t.Fatalf("answer %+v", r)
	}
}

// A request naming 100,000 topics is judged in time and memory in
// proportion to its size: every item once, refusals indexed, never
// searched one by one.
func TestRequireHostileManyTopics(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "names", Action: ActionReject, Match: Selector{APIs: []string{"CreateTopics"}},
		Require: &Require{TopicName: "team-*", Configs: map[string]ConfigRule{"retention.ms": {Min: n64(1)}}}})
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	const n = 100_000
	for i := 0; i < n; i++ {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = "t" + strconv.Itoa(i)
		if i%2 == 0 {
			t.Topic = "team-" + t.Topic
		}
		t.NumPartitions, t.ReplicationFactor = 1, 1
		cf := kmsg.NewCreateTopicsRequestTopicConfig()
		cf.Name, cf.Value = "retention.ms", kmsg.StringPtr("100")
		t.Configs = append(t.Configs, cf)
		req.Topics = append(req.Topics, t)
	}
	c := request(t, req, "c")
	raw := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
	frame := len(raw)
	if _, err := c.body.Request(); err != nil { // the decode is the relay's, shared
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := c.check(e, t0)
	q, _ := c.body.Request()
	h := c.body.Header()
	stripped := WithoutRefused(raw, h, q, v.Refusals)
	runtime.ReadMemStats(&after)
	if v.Outcome != Reject || len(v.Refusals) != n/2 || v.Whole {
		t.Fatalf("verdict: %v, %d refusals, whole %v; want half of %d refused", v.Outcome, len(v.Refusals), v.Whole, n)
	}
	if len(stripped) >= frame {
		t.Fatalf("stripped request %d bytes, not smaller than %d", len(stripped), frame)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("frame %d bytes; judging and stripping allocated %d bytes (%.1f per frame byte)", frame, alloc, float64(alloc)/float64(frame))
	if alloc > uint64(16*frame) {
		t.Errorf("allocated %d bytes for a %d-byte frame: more than 16 per byte", alloc, frame)
	}
}

// A partial refusal leaves the rest of the request to the rules after
// it: one bad topic never carries a denied one past an access rule, nor
// a produce past a rate.
func TestRequirePartialKeepsLaterRules(t *testing.T) {
	e, _ := newEngine(t,
		Rule{Name: "min3", Action: ActionReject, Match: Selector{APIs: []string{"CreateTopics"}},
			Require: &Require{Partitions: &Range{Min: n64(3)}}},
		Rule{Name: "deny-secret", Action: ActionReject, Match: Selector{Topics: []string{"secret.*"}}})
	req := kmsg.NewPtrCreateTopicsRequest()
	for _, tp := range []struct {
		name  string
		parts int32
	}{{"bad", 1}, {"secret.x", 6}} {
		x := kmsg.NewCreateTopicsRequestTopic()
		x.Topic, x.NumPartitions, x.ReplicationFactor = tp.name, tp.parts, 1
		req.Topics = append(req.Topics, x)
	}
	if v := request(t, req, "c").check(e, t0); v.Outcome != Reject || v.Rule != "deny-secret" || len(v.Refusals) != 0 {
		t.Fatalf("verdict %+v, want the whole request refused by deny-secret", v)
	}

	e, _ = newEngine(t,
		Rule{Name: "rate", Action: ActionThrottle, Match: Selector{APIs: []string{"Produce"}}, Limits: Limits{RequestsPerSecond: 1, Key: "connection"}},
		Rule{Name: "acks", Action: ActionReject, Match: Selector{APIs: []string{"Produce"}, Topics: []string{"orders.*"}},
			Require: &Require{Acks: "all"}})
	conn := &ConnState{}
	var last Verdict
	for i := 0; i < 3; i++ {
		c := request(t, produce("orders.a", "other"), "c")
		c.r.Conn = conn
		last = c.check(e, t0)
		if last.Outcome != Reject || last.Whole || len(last.Refusals) != 1 || last.Refusals[0].Topic != "orders.a" {
			t.Fatalf("request %d: %+v, want orders.a refused and other forwarded", i, last)
		}
	}
	if last.Delay <= 0 {
		t.Fatalf("the forwarded rest was never throttled: %+v", last)
	}
}

// NaN is no number within bounds.
func TestRequireConfigNaN(t *testing.T) {
	ru := &rule{Rule: Rule{Name: "r", Require: &Require{Configs: map[string]ConfigRule{"min.cleanable.dirty.ratio": {Max: n64(1)}}}}}
	if _, text := ru.judgeConfig("min.cleanable.dirty.ratio", "NaN"); text == "" {
		t.Fatal("NaN passed a max")
	}
}

// A name given twice, refused once, is refused for both entries: the
// request goes on without the name, and the answer has every entry.
func TestRequireDuplicateNames(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "min3", Action: ActionReject, Match: Selector{APIs: []string{"CreateTopics"}},
		Require: &Require{Partitions: &Range{Min: n64(3)}}})
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 5
	for _, tp := range []struct {
		name  string
		parts int32
	}{{"a", 1}, {"a", 6}, {"b", 6}} {
		x := kmsg.NewCreateTopicsRequestTopic()
		x.Topic, x.NumPartitions, x.ReplicationFactor = tp.name, tp.parts, 1
		req.Topics = append(req.Topics, x)
	}
	c := request(t, req, "c")
	v := c.check(e, t0)
	if v.Outcome != Reject || v.Whole || len(v.Refusals) != 2 || v.Refusals[0].Topic != "a" || v.Refusals[1].Topic != "a" {
		t.Fatalf("verdict %+v, want both entries of a refused", v)
	}
	q, _ := c.body.Request()
	raw := kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
	out := WithoutRefused(raw, c.body.Header(), q, v.Refusals)
	fwd := kmsg.NewPtrCreateTopicsRequest()
	fwd.Version = 5
	h := c.body.Header()
	if err := fwd.ReadFrom(out[h.BodyOffset:]); err != nil || len(fwd.Topics) != 1 || fwd.Topics[0].Topic != "b" {
		t.Fatalf("forwarded %+v (%v), want b alone", fwd.Topics, err)
	}
}

// Record conditions read one record at a time: an uncompressed batch of
// 200,000 tiny records is judged in memory far below its own size, and
// only the kept record errors get messages.
func TestRequireRecordsOneAtATime(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "keys", Action: ActionReject, Match: Selector{APIs: []string{"Produce"}},
		Require: &Require{RecordKey: true}})
	recs := make([]kmsg.Record, 200_000)
	for i := range recs {
		recs[i] = kmsg.Record{Value: []byte("v")} // keyless: every one breaks the rule
	}
	req := produce("t")
	req.Topics[0].Partitions[0].Records = batchtest.PlainBatch(recs...)
	c := request(t, req, "c")
	if _, err := c.body.Request(); err != nil {
		t.Fatal(err)
	}
	frame := len(req.Topics[0].Partitions[0].Records)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := c.check(e, t0)
	runtime.ReadMemStats(&after)
	if v.Outcome != Reject || len(v.Refusals) != 1 || len(v.Refusals[0].RecordErrors) != maxRecordErrors ||
		!strings.HasSuffix(v.Refusals[0].Message, "(and 199999 more records)") {
		t.Fatalf("verdict %+v", v)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte batch of %d records judged in %d bytes", frame, len(recs), alloc)
	if alloc > uint64(frame/4) {
		t.Errorf("judging allocated %d bytes for a %d-byte batch", alloc, frame)
	}
}

// An acks rule on every topic reads the acks the relay read from the
// frame: a produce that meets it is never decoded.
func TestRequireAcksHeaderLevel(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "acks", Action: ActionReject, Match: Selector{APIs: []string{"Produce"}},
		Require: &Require{Acks: "all"}})
	for _, acks := range []int16{-1, 1} {
		req := produce("a", "b")
		req.Acks = acks
		c := request(t, req, "c")
		c.r.Acks, c.r.AcksRead = acks, true
		v := c.check(e, t0)
		switch {
		case acks == -1 && (v.Outcome != Pass || c.body.Decoded()):
			t.Errorf("acks=all: %+v, decoded %v; want a pass from the header", v, c.body.Decoded())
		case acks == 1 && (v.Outcome != Reject || !v.Whole || len(v.Refusals) != 2 || v.Code != codeInvalidRequiredAcks):
			t.Errorf("acks=1: %+v; want both partitions refused", v)
		}
	}
}
