package framing

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// decoded is req as the relay sees it: encoded by a client, then decoded
// from the frame (so that null and empty lists come out as kmsg reads
// them).
func decoded(t *testing.T, req kmsg.Request) kmsg.Request {
	t.Helper()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("app")).AppendRequest(nil, req, 1)
	h, err := ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBody(h, frame)
	back, err := b.Request()
	if err != nil || back == nil {
		t.Fatalf("%s v%d: decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return back
}

func topicsOf(req kmsg.Request) []string {
	got := []string{}
	EachTopic(req, NewTopicIDs(), func(topic string, _ int32) bool {
		got = append(got, topic)
		return true
	})
	return got
}

func str(s string) *string { return &s }

// An ACL filter or binding that can cover more than one topic (a null
// name, "*", a pattern other than LITERAL, on TOPIC or ANY resources)
// names UnknownTopic, which every topic rule selects; one literal topic
// name stays a name, whether the resource type is TOPIC or ANY.
func TestEachTopicACLWildcards(t *testing.T) {
	const (
		any, topic, group                    = kmsg.ACLResourceTypeAny, kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup
		anyPattern, match, literal, prefixed = kmsg.ACLResourcePatternTypeAny, kmsg.ACLResourcePatternTypeMatch,
			kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	)
	cases := []struct {
		typ     kmsg.ACLResourceType
		name    *string
		pattern kmsg.ACLResourcePatternType
		want    []string
	}{
		{topic, str("secret"), literal, []string{"secret"}},
		{any, str("secret"), literal, []string{"secret"}},
		{group, str("secret"), literal, []string{}},
		{group, nil, match, []string{}},
		{topic, nil, literal, []string{UnknownTopic}},
		{any, nil, literal, []string{UnknownTopic}},
		{topic, str("*"), literal, []string{UnknownTopic}},
		{any, str("*"), literal, []string{UnknownTopic}},
		{topic, str("sec"), prefixed, []string{UnknownTopic}},
		{topic, str("secret"), match, []string{UnknownTopic}},
		{topic, str("secret"), anyPattern, []string{UnknownTopic}},
		{any, str("secret"), match, []string{UnknownTopic}},
	}
	for _, c := range cases {
		del := kmsg.NewPtrDeleteACLsRequest()
		del.SetVersion(3)
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType = c.typ, c.name, c.pattern
		del.Filters = append(del.Filters, f)

		desc := kmsg.NewPtrDescribeACLsRequest()
		desc.SetVersion(3)
		desc.ResourceType, desc.ResourceName, desc.ResourcePatternType = c.typ, c.name, c.pattern

		reqs := []kmsg.Request{del, desc}
		if c.name != nil { // bindings always have a name
			create := kmsg.NewPtrCreateACLsRequest()
			create.SetVersion(3)
			b := kmsg.NewCreateACLsRequestCreation()
			b.ResourceType, b.ResourceName, b.ResourcePatternType = c.typ, *c.name, c.pattern
			b.Principal, b.Host = "User:x", "*"
			create.Creations = append(create.Creations, b)
			reqs = append(reqs, create)
		}
		for _, req := range reqs {
			name := "<null>"
			if c.name != nil {
				name = *c.name
			}
			if got := topicsOf(decoded(t, req)); !slices.Equal(got, c.want) {
				t.Errorf("%s type %v name %q pattern %v: topics %q, want %q",
					kmsg.NameForKey(req.Key()), c.typ, name, c.pattern, got, c.want)
			}
		}
	}
	// v0 has no pattern type: the broker reads LITERAL, and so does kproxy.
	v0 := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName = topic, str("secret")
	v0.Filters = append(v0.Filters, f)
	if got := topicsOf(decoded(t, v0)); !slices.Equal(got, []string{"secret"}) {
		t.Errorf("DeleteAcls v0 literal topic: topics %q, want [secret]", got)
	}
}

// ElectLeaders with a null topic list elects every partition: it may
// move any topic's leaders, so it names UnknownTopic. An empty list
// elects none.
func TestEachTopicElectLeadersAll(t *testing.T) {
	for v := int16(0); v <= MaxVersion(43); v++ {
		all := kmsg.NewPtrElectLeadersRequest()
		all.SetVersion(v)
		if got := topicsOf(decoded(t, all)); !slices.Equal(got, []string{UnknownTopic}) {
			t.Errorf("ElectLeaders v%d, null topics: topics %q, want one UnknownTopic", v, got)
		}
		none := kmsg.NewPtrElectLeadersRequest()
		none.SetVersion(v)
		none.Topics = []kmsg.ElectLeadersRequestTopic{}
		if got := topicsOf(decoded(t, none)); len(got) != 0 {
			t.Errorf("ElectLeaders v%d, empty topics: topics %q, want none", v, got)
		}
	}
}

// A key kproxy does not know may belong to an API that names topics.
func TestNamesTopicsUnknownKeys(t *testing.T) {
	for _, k := range []int16{-1, MaxKey + 1, 30000} {
		if !NamesTopics(k) {
			t.Errorf("key %d (unknown): NamesTopics false, want true", k)
		}
	}
	if NamesTopics(KeyApiVersions) || !NamesTopics(KeyProduce) {
		t.Error("known keys changed")
	}
}
