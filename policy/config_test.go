package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// Every invalid field is reported with its path in the section, so the
// loader can point at the YAML line.
func TestValidateErrors(t *testing.T) {
	ok := Rule{Name: "ok", Action: ActionLog}
	cases := []struct {
		name  string
		rules []Rule
		field string
		msg   string
	}{
		{"missing name", []Rule{{Action: ActionLog}}, "rules.0.name", "required"},
		{"duplicate name", []Rule{ok, {Name: "ok", Action: ActionReject}}, "rules.1.name", `"ok" is used`},
		{"missing action", []Rule{ok, {Name: "b"}}, "rules.1.action", "reject, throttle or log"},
		{"unknown action", []Rule{{Name: "a", Action: "deny"}}, "rules.0.action", "reject, throttle or log"},
		{"action case", []Rule{{Name: "a", Action: "Reject"}}, "rules.0.action", "reject, throttle or log"},
		{"throttle without rates", []Rule{{Name: "a", Action: ActionThrottle}}, "rules.0.action", "throttle needs a rate"},
		{"throttle with key only", []Rule{{Name: "a", Action: ActionThrottle, Limits: Limits{Key: "rule"}}}, "rules.0.action", "throttle needs a rate"},
		{"negative requests", []Rule{{Name: "a", Action: ActionReject, Limits: Limits{RequestsPerSecond: -1}}}, "rules.0.limits", "negative"},
		{"negative bytes", []Rule{{Name: "a", Action: ActionThrottle, Limits: Limits{RequestsPerSecond: 1, BytesPerSecond: -1}}}, "rules.0.limits", "negative"},
		{"negative size", []Rule{{Name: "a", Action: ActionReject, Limits: Limits{MaxBatchRecords: -1}}}, "rules.0.limits", "sizes must not be negative"},
		{"rates and sizes", []Rule{{Name: "a", Action: ActionReject, Limits: Limits{RequestsPerSecond: 1, MaxRequestBytes: 10}}}, "rules.0.limits", "separate rules"},
		{"throttle on sizes", []Rule{{Name: "a", Action: ActionThrottle, Limits: Limits{MaxRequestBytes: 10}}}, "rules.0.action", "throttle needs a rate"},
		{"bad key", []Rule{{Name: "a", Action: ActionThrottle, Limits: Limits{RequestsPerSecond: 1, Key: "client"}}}, "rules.0.limits.key", "client_id, connection, rule or topic"},
		{"bad client glob", []Rule{{Name: "a", Action: ActionLog, Match: Selector{ClientID: "app-["}}}, "rules.0.match.client_id", "bad glob"},
		{"unknown API", []Rule{ok, {Name: "b", Action: ActionLog, Match: Selector{APIs: []string{"Produce", "Prodcue"}}}}, "rules.1.match.apis.1", `unknown Kafka API "Prodcue"`},
		{"kmsg spelling", []Rule{{Name: "a", Action: ActionLog, Match: Selector{APIs: []string{"SASLHandshake"}}}}, "rules.0.match.apis.0", "unknown Kafka API"},
		{"API case", []Rule{{Name: "a", Action: ActionLog, Match: Selector{APIs: []string{"produce"}}}}, "rules.0.match.apis.0", "unknown Kafka API"},
		{"bad topic glob", []Rule{{Name: "a", Action: ActionLog, Match: Selector{Topics: []string{"orders", "[a-"}}}}, "rules.0.match.topics.1", "bad glob"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Config{Rules: c.rules}.Validate()
			var fe *fielderr.Error
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *fielderr.Error", err)
			}
			if fe.Field != c.field || !strings.Contains(fe.Msg, c.msg) {
				t.Fatalf("got %q: %q, want %q: ...%s...", fe.Field, fe.Msg, c.field, c.msg)
			}
		})
	}
}

// Valid sections, including every key, action and Kafka's API spellings.
func TestValidateAccepts(t *testing.T) {
	cases := map[string]Config{
		"defaults":    Defaults(),
		"access rule": {Rules: []Rule{{Name: "no-acls", Action: ActionReject, Match: Selector{APIs: []string{"CreateAcls", "DeleteAcls"}}}}},
		"all keys": {Rules: []Rule{
			{Name: "a", Action: ActionThrottle, Limits: Limits{BytesPerSecond: 1 << 20}},
			{Name: "b", Action: ActionThrottle, Limits: Limits{RequestsPerSecond: 100, Key: "client_id"}},
			{Name: "c", Action: ActionReject, Limits: Limits{RequestsPerSecond: 1, Key: "connection"}},
			{Name: "d", Action: ActionLog, Limits: Limits{BytesPerSecond: 10, Key: "rule"}},
			{Name: "e", Action: ActionReject, Limits: Limits{MaxRequestBytes: 1 << 20, MaxBatchBytes: 1 << 19, MaxBatchRecords: 1000}},
		}},
		"globs and APIs": {Rules: []Rule{{Name: "g", Action: ActionLog, Match: Selector{
			ClientID: "app-[0-9]*",
			APIs:     []string{"Produce", "Fetch", "SaslHandshake", "InitProducerId", "DescribeCluster", "ConsumerGroupHeartbeat"},
			Topics:   []string{"orders.*", "?eta", "*"},
		}}}},
	}
	for name, c := range cases {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
