package policy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// deny is an access rule: it refuses whatever its selector matches, so a
// Reject verdict naming it proves the selector matched.
func deny(name string, m Selector) Rule { return Rule{Name: name, Action: ActionReject, Match: m} }

// Each selector field matches on its own; unset fields match anything.
func TestSelector(t *testing.T) {
	cases := []struct {
		name  string
		sel   Selector
		req   kmsg.Request
		id    string
		match bool
	}{
		{"empty matches all", Selector{}, produce("orders"), "app-1", true},
		{"empty matches no client id", Selector{}, metadata(), "", true},
		{"exact id", Selector{ClientID: "app-1"}, produce("orders"), "app-1", true},
		{"exact id other", Selector{ClientID: "app-1"}, produce("orders"), "app-10", false},
		{"exact id is not a prefix", Selector{ClientID: "app"}, produce("orders"), "app-1", false},
		{"glob id", Selector{ClientID: "app-*"}, produce("orders"), "app-1", true},
		{"glob id other", Selector{ClientID: "app-*"}, produce("orders"), "web-1", false},
		{"glob class", Selector{ClientID: "app-[0-4]"}, produce("orders"), "app-3", true},
		{"glob class other", Selector{ClientID: "app-[0-4]"}, produce("orders"), "app-7", false},
		{"API listed", Selector{APIs: []string{"Fetch", "Produce"}}, produce("orders"), "app-1", true},
		{"API not listed", Selector{APIs: []string{"Fetch", "Metadata"}}, produce("orders"), "app-1", false},
		{"topic glob", Selector{Topics: []string{"orders*"}}, produce("orders.eu"), "app-1", true},
		{"one of two topics", Selector{Topics: []string{"pay*"}}, produce("orders", "payments"), "app-1", true},
		{"no topic matches", Selector{Topics: []string{"pay*"}}, produce("orders", "audit"), "app-1", false},
		{"second glob", Selector{Topics: []string{"x", "audit"}}, produce("orders", "audit"), "app-1", true},
		{"fetch topic", Selector{Topics: []string{"orders"}}, fetch("orders"), "app-1", true},
		{"metadata topic", Selector{Topics: []string{"orders"}}, metadata("orders"), "app-1", true},
		{"all-topics metadata names none", Selector{Topics: []string{"*"}}, metadata(), "app-1", false},
		{"request without topics", Selector{Topics: []string{"*"}}, kmsg.NewPtrDescribeClusterRequest(), "app-1", false},
		{"all fields", Selector{ClientID: "app-*", APIs: []string{"Produce"}, Topics: []string{"orders"}}, produce("orders"), "app-1", true},
		{"all fields, id wrong", Selector{ClientID: "app-*", APIs: []string{"Produce"}, Topics: []string{"orders"}}, produce("orders"), "web", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, _ := newEngine(t, deny("r", c.sel))
			v := request(t, c.req, c.id).check(e, t0)
			if got := v.Outcome == Reject && v.Rule == "r"; got != c.match {
				t.Fatalf("matched %v, want %v (verdict %+v)", got, c.match, v)
			}
		})
	}
}

// A key kproxy does not know (newer than kmsg, or garbage) matches no API
// list and does not panic.
func TestSelectorUnknownKey(t *testing.T) {
	e, _ := newEngine(t, deny("r", Selector{APIs: []string{"Produce"}}))
	c := request(t, produce("orders"), "app-1")
	for _, key := range []int16{-1, 999, 32767} {
		c.r.Key = key
		if v := c.check(e, t0); v.Outcome != Pass {
			t.Fatalf("key %d: %+v, want Pass", key, v)
		}
	}
}

// Header-only rules never decode the body; topic rules decode it, but
// only once their header fields have matched.
func TestBodyDecodedOnlyForTopicRules(t *testing.T) {
	highRate := Limits{RequestsPerSecond: 1e9}
	cases := []struct {
		name    string
		rule    Rule
		decoded bool
	}{
		{"client id rule passing", Rule{Name: "r", Action: ActionThrottle, Match: Selector{ClientID: "app-*"}, Limits: highRate}, false},
		{"API rule passing", Rule{Name: "r", Action: ActionReject, Match: Selector{APIs: []string{"Produce"}}, Limits: highRate}, false},
		{"log rule", Rule{Name: "r", Action: ActionLog, Match: Selector{ClientID: "app-1"}}, false},
		{"non-matching rule", deny("r", Selector{ClientID: "other"}), false},
		{"topic rule behind another client id", deny("r", Selector{ClientID: "other", Topics: []string{"*"}}), false},
		{"topic rule behind another API", deny("r", Selector{APIs: []string{"Fetch"}, Topics: []string{"*"}}), false},
		{"topic rule", Rule{Name: "r", Action: ActionLog, Match: Selector{Topics: []string{"nope"}}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, _ := newEngine(t, c.rule)
			call := request(t, produce("orders"), "app-1")
			if v := call.check(e, t0); v.Outcome != Pass {
				t.Fatalf("verdict %+v, want Pass", v)
			}
			if got := call.body.Decoded(); got != c.decoded {
				t.Fatalf("body decoded %v, want %v", got, c.decoded)
			}
		})
	}
}
