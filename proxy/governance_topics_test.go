package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

func i64(n int64) *int64 { return &n }

// topicStandards is the topic rule, within what one kfake broker
// can host (replication factor 1).
func topicStandards(action string) policy.Rule {
	return policy.Rule{Name: "topic-standards", Action: action,
		Match: policy.Selector{APIs: []string{"CreateTopics", "CreatePartitions", "AlterConfigs", "IncrementalAlterConfigs"}},
		Require: &policy.Require{
			Partitions:        &policy.Range{Min: i64(3), Max: i64(48)},
			ReplicationFactor: &policy.Range{Min: i64(1), Max: i64(1)},
			TopicName:         "team-*.*",
			Configs: map[string]policy.ConfigRule{
				"retention.ms":   {Min: i64(3600000), Max: i64(604800000)},
				"cleanup.policy": {OneOf: []string{"delete", "compact"}},
			},
		}}
}

func kadmClient(t *testing.T, env *testEnv) (*kadm.Client, context.Context) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.ClientID("gov-admin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return kadm.NewClient(cl), ctx
}

func topicExists(t *testing.T, adm *kadm.Client, ctx context.Context, topic string) bool {
	t.Helper()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := md.Topics[topic]
	return ok && d.Err == nil
}

// Each topic condition refuses only the topics that break it, with
// POLICY_VIOLATION and a message naming the rule and the field; the
// topics within bounds in the same request are created.
func TestGovernanceCreateTopicsFranz(t *testing.T) {
	env := startKfake(t, nil)
	ps := applyPolicies(t, env, topicStandards(policy.ActionReject))
	adm, ctx := kadmClient(t, env)

	day := "86400000"
	minute := "60000"
	cases := []struct {
		topic   string
		parts   int32
		rf      int16
		configs map[string]*string
		want    string // "" when the topic is created
	}{
		{"team-a.ok", 3, 1, map[string]*string{"retention.ms": &day}, ""},
		{"team-a.few", 1, 1, nil, "rule topic-standards: partitions 1 below min 3"},
		{"team-a.many", 60, 1, nil, "rule topic-standards: partitions 60 above max 48"},
		{"team-a.rf", 3, 2, nil, "rule topic-standards: replication_factor 2 above max 1"},
		{"orders", 3, 1, nil, `rule topic-standards: topic_name "orders" does not match "team-*.*"`},
		{"team-a.short", 3, 1, map[string]*string{"retention.ms": &minute}, "rule topic-standards: configs retention.ms 60000 below min 3600000"},
		{"team-a.default", -1, 1, nil, "rule topic-standards: partitions left to the broker's default; set it explicitly"},
	}
	for _, c := range cases {
		resp, err := adm.CreateTopic(ctx, c.parts, c.rf, c.configs, c.topic)
		if c.want == "" {
			if err != nil || resp.Err != nil {
				t.Fatalf("%s: create within bounds failed: %v %v", c.topic, err, resp.Err)
			}
			continue
		}
		if !errors.Is(resp.Err, kerr.PolicyViolation) || resp.ErrMessage != c.want {
			t.Errorf("%s: got %v %q, want POLICY_VIOLATION %q", c.topic, resp.Err, resp.ErrMessage, c.want)
		}
		if topicExists(t, adm, ctx, c.topic) {
			t.Errorf("%s: refused topic exists", c.topic)
		}
	}

	// One request, three topics: the two within bounds are created.
	resps, err := adm.CreateTopics(ctx, 4, 1, nil, "team-b.one", "bad-name", "team-b.two")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"team-b.one", "team-b.two"} {
		if r := resps[name]; r.Err != nil || !topicExists(t, adm, ctx, name) {
			t.Errorf("%s: %v, want created beside the refused topic", name, r.Err)
		}
	}
	if r := resps["bad-name"]; !errors.Is(r.Err, kerr.PolicyViolation) || !strings.Contains(r.ErrMessage, "topic_name") {
		t.Errorf("bad-name: %v %q, want POLICY_VIOLATION on topic_name", r.Err, r.ErrMessage)
	}
	if got := ps.count(t, "kproxy_policy_rejected_total", "topic-standards"); got != 7 {
		t.Errorf("kproxy_policy_rejected_total = %v, want 7 (one per refused request)", got)
	}
}

// CreatePartitions' new count and the config APIs on topics.
func TestGovernanceAlterFranz(t *testing.T) {
	env := startKfake(t, nil)
	adm, ctx := kadmClient(t, env)
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "team-c.t"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "team-c.u"); err != nil {
		t.Fatal(err)
	}
	applyPolicies(t, env, topicStandards(policy.ActionReject))

	r, err := adm.UpdatePartitions(ctx, 60, "team-c.t")
	if err != nil {
		t.Fatal(err)
	}
	if got := r["team-c.t"]; !errors.Is(got.Err, kerr.PolicyViolation) || got.ErrMessage != "rule topic-standards: partitions 60 above max 48" {
		t.Errorf("UpdatePartitions to 60: %v %q", got.Err, got.ErrMessage)
	}
	if r, err = adm.UpdatePartitions(ctx, 6, "team-c.t"); err != nil || r["team-c.t"].Err != nil {
		t.Errorf("UpdatePartitions to 6: %v %v", err, r["team-c.t"].Err)
	}

	week2 := "1209600000"
	never := "-1"
	hour := "3600000"
	bogus := "delete,archive"
	for _, c := range []struct {
		value *string
		name  string
		want  string
	}{
		{&week2, "retention.ms", "rule topic-standards: configs retention.ms 1209600000 above max 604800000"},
		{&never, "retention.ms", "rule topic-standards: configs retention.ms -1 above max 604800000"},
		{&bogus, "cleanup.policy", `rule topic-standards: configs cleanup.policy "delete,archive" not one of [delete, compact]`},
	} {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: c.name, Value: c.value}}, "team-c.t", "team-c.u")
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Fatalf("%d resources answered, want 2", len(rs))
		}
		for _, x := range rs {
			if !errors.Is(x.Err, kerr.PolicyViolation) || x.ErrMessage != c.want {
				t.Errorf("incremental %s=%s on %s: %v %q, want %q", c.name, *c.value, x.Name, x.Err, x.ErrMessage, c.want)
			}
		}
		// The non-incremental AlterConfigs is judged the same way.
		rs, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: c.name, Value: c.value}}, "team-c.t")
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || !errors.Is(rs[0].Err, kerr.PolicyViolation) || rs[0].ErrMessage != c.want {
			t.Errorf("AlterConfigs %s=%s: %+v", c.name, *c.value, rs)
		}
	}
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &hour}}, "team-c.t")
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("retention.ms within bounds: %v %+v", err, rs)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, "team-c.t")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := cfgs[0].Configs[0].MaybeValue(), 0; v == "" {
		// the broker's answer is read below by name
	}
	found := false
	for _, c := range cfgs[0].Configs {
		if c.Key == "retention.ms" && c.MaybeValue() == hour {
			found = true
		}
	}
	if !found {
		t.Errorf("retention.ms within bounds was not applied: %+v", cfgs[0].Configs)
	}
}

// sarama's ClusterAdmin sees the broker's own error type with the rule's
// message, and log-only rules change nothing but count.
func TestGovernanceSaramaAdmin(t *testing.T) {
	env := startKfake(t, nil)
	ps := applyPolicies(t, env, topicStandards(policy.ActionReject))
	d := &viaDialer{want: env.addr}
	cfg := saramaConfig(d)
	adm, err := sarama.NewClusterAdmin([]string{env.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	err = adm.CreateTopic("team-s.one", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
	var te *sarama.TopicError
	if !errors.As(err, &te) || te.Err != sarama.ErrPolicyViolation || te.ErrMsg == nil || *te.ErrMsg != "rule topic-standards: partitions 1 below min 3" {
		t.Fatalf("sarama CreateTopic with 1 partition: %v, want ErrPolicyViolation with the rule's message", err)
	}
	if err := adm.CreateTopic("team-s.two", &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("sarama CreateTopic within bounds: %v", err)
	}

	ps.reload(t, env, topicStandards(policy.ActionLog))
	if err := adm.CreateTopic("team-s.three", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("log-only rule refused: %v", err)
	}
	topics, err := adm.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := topics["team-s.three"]; !ok || d.NumPartitions != 1 {
		t.Errorf("log-only rule changed the request: %+v", d)
	}
	if got := ps.count(t, "kproxy_policy_logged_total", "topic-standards"); got != 1 {
		t.Errorf("kproxy_policy_logged_total = %v, want 1", got)
	}
	if got := violations(t, ps, "topic-standards", "partitions"); got != 2 {
		t.Errorf("kproxy_policy_violations_total{partitions} = %v, want 2 (refused, then logged)", got)
	}
	if !strings.Contains(env.logs.String(), "request breaks a log-only rule") {
		t.Errorf("no log line for the log-only violation:\n%s", env.logs)
	}
	d.check(t)
}

// violations reads kproxy_policy_violations_total for a rule and condition.
func violations(t testing.TB, ps *policySet, rule, condition string) float64 {
	t.Helper()
	return metricValue(t, ps.reg, "kproxy_policy_violations_total", map[string]string{"rule": rule, "condition": condition})
}

// A log-only content rule leaves a kproxy.policy event with action log
// and the violation as the reason on the request's span, and the request
// goes to the broker unchanged.
func TestGovernanceLogSpanEvent(t *testing.T) {
	tr, flush := newTestTracer(t, nil)
	env := startTracedKfake(t, nil, tr)
	applyPolicies(t, env, topicStandards(policy.ActionLog))
	c := dialRaw(t, env.addr)
	defer c.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 5, 5000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "team-x.one", 1, 1
	req.Topics = append(req.Topics, rt)
	resp := ask(t, c, req, 5).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("log-only rule: %+v, want the topic created", resp.Topics)
	}
	evs := policyEvents(flush(), "19")
	if len(evs) != 1 || evs[0]["kproxy.policy.action"] != "log" || evs[0]["kproxy.policy.rule"] != "topic-standards" ||
		evs[0]["kproxy.policy.reason"] != "rule topic-standards: partitions 1 below min 3" {
		t.Fatalf("events %v, want one log event with the violation", evs)
	}
}
