package policy

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/topicplant"
)

// opaque is a request of key/version as a client newer than kproxy would
// frame it: a v1 header and a body kproxy cannot read.
func opaque(key, version int16) call {
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, uint16(key))
	frame = binary.BigEndian.AppendUint16(frame, uint16(version))
	frame = binary.BigEndian.AppendUint32(frame, 42)
	frame = binary.BigEndian.AppendUint16(frame, 3)
	frame = append(frame, "app"...)
	frame = append(frame, "\x00\x06secret"...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	h, _ := framing.ParseRequestHeader(frame)
	body := framing.NewBody(h, frame)
	return call{&Request{Key: key, Version: version, ClientID: "app", Bytes: len(frame),
		Topics: framing.NewTopicIDs(), Conn: &ConnState{}}, &body}
}

// An API kproxy does not know (a broker newer than its kmsg may serve
// one) might name any topic: a topic rule selects it, and so does an
// allow-list of APIs, which does not list it. A rule listing the APIs it
// selects does not.
func TestRuleSelectsUnknownAPIs(t *testing.T) {
	unknown := []call{opaque(kmsg.MaxKey+1, 0), opaque(30000, 2)}
	for _, c := range []struct {
		sel  Selector
		want Outcome
	}{
		{Selector{Topics: []string{"secret"}}, Reject},
		{Selector{ExceptTopics: []string{"public-*"}}, Reject},
		{Selector{ExceptAPIs: []string{"Produce", "Fetch"}}, Reject},
		{Selector{APIs: []string{"DeleteTopics"}}, Pass},
		{Selector{APIs: []string{"DeleteTopics"}, Topics: []string{"secret"}}, Pass},
	} {
		e, _ := newEngine(t, deny("r", c.sel))
		for _, u := range unknown {
			if v := u.check(e, t0); v.Outcome != c.want {
				t.Errorf("%+v, key %d: verdict %+v, want outcome %d", c.sel, u.r.Key, v, c.want)
			}
		}
	}
	// A version above what kproxy knows of an API that names topics.
	e, _ := newEngine(t, deny("r", Selector{Topics: []string{"secret"}}))
	if v := opaque(framing.KeyProduce, framing.MaxVersion(framing.KeyProduce)+1).check(e, t0); v.Outcome != Reject {
		t.Errorf("Produce above kproxy's versions: verdict %+v, want Reject", v)
	}
}

func strp(s string) *string { return &s }

// Requests about many topics at once (ACL filters and patterns that can
// cover the denied topic, ElectLeaders of every partition) are refused by
// a rule on a topic, with the cluster error a broker would give them;
// those about other topics alone pass.
func TestTopicRuleWideRequests(t *testing.T) {
	const (
		topic, any        = kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeAny
		literal, prefix   = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
		match, anyPattern = kmsg.ACLResourcePatternTypeMatch, kmsg.ACLResourcePatternTypeAny
	)
	electAll := versioned(kmsg.NewPtrElectLeadersRequest(), 2)
	electOrders := versioned(kmsg.NewPtrElectLeadersRequest(), 2)
	electOrders.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "orders", Partitions: []int32{0}}}
	describeAll := versioned(kmsg.NewPtrDescribeACLsRequest(), 3)
	describeAll.ResourceType = any
	for _, c := range []struct {
		name string
		req  kmsg.Request
		want Outcome
		code int16
	}{
		{"DeleteAcls ANY secret", topicplant.ACLFilter(any, strp("secret"), literal), Reject, codeTopicAuthorization},
		{"DeleteAcls TOPIC null", topicplant.ACLFilter(topic, nil, literal), Reject, codeClusterAuthorization},
		{"DeleteAcls TOPIC orders MATCH", topicplant.ACLFilter(topic, strp("orders"), match), Reject, codeClusterAuthorization},
		{"DeleteAcls ANY ANY", topicplant.ACLFilter(any, nil, anyPattern), Reject, codeClusterAuthorization},
		{"DeleteAcls TOPIC orders", topicplant.ACLFilter(topic, strp("orders"), literal), Pass, 0},
		{"CreateAcls TOPIC *", topicplant.ACLBinding(topic, "*", literal), Reject, codeClusterAuthorization},
		{"CreateAcls TOPIC sec PREFIXED", topicplant.ACLBinding(topic, "sec", prefix), Reject, codeClusterAuthorization},
		{"CreateAcls TOPIC orders", topicplant.ACLBinding(topic, "orders", literal), Pass, 0},
		{"DescribeAcls ANY null", describeAll, Reject, codeClusterAuthorization},
		{"ElectLeaders all", electAll, Reject, codeClusterAuthorization},
		{"ElectLeaders orders", electOrders, Pass, 0},
	} {
		e, _ := newEngine(t, deny("secret", Selector{Topics: []string{"secret"}}))
		v := request(t, c.req, "app").check(e, t0)
		if v.Outcome != c.want || v.Code != c.code {
			t.Errorf("%s: verdict %+v, want outcome %d code %d", c.name, v, c.want, c.code)
		}
	}
}

// A reject rule that selects every API, or every API but some, hides the
// APIs kproxy does not know from ApiVersions answers; rules that list
// their APIs, or only log or throttle, do not.
func TestHidesUnknownAPIs(t *testing.T) {
	for _, c := range []struct {
		rule Rule
		want bool
	}{
		{deny("r", Selector{Topics: []string{"secret"}}), true},
		{deny("r", Selector{ExceptAPIs: []string{"Produce"}}), true},
		{deny("r", Selector{ClientID: "bad"}), true},
		{deny("r", Selector{APIs: []string{"DeleteTopics"}, Topics: []string{"secret"}}), false},
		{Rule{Name: "r", Action: ActionLog, Match: Selector{Topics: []string{"secret"}}}, false},
	} {
		e, _ := newEngine(t, c.rule)
		if got := e.HidesUnknownAPIs(); got != c.want {
			t.Errorf("%+v: HidesUnknownAPIs %v, want %v", c.rule, got, c.want)
		}
	}
	var none *Engine
	if none.HidesUnknownAPIs() {
		t.Error("no rules: HidesUnknownAPIs true")
	}
}
