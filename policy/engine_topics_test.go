package policy

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/topicplant"
)

// A rule selecting a topic selects every request that names it, whatever
// the API and version, by name or by a learnt id: each topic planted in
// a request (and still in its frame at that version) is matched by the
// log rule named after it.
func TestTopicRuleSeesEveryAPI(t *testing.T) {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		proto := kmsg.RequestForKey(k)
		if proto == nil {
			continue
		}
		for v := int16(0); v <= proto.MaxVersion(); v++ {
			for _, byID := range []bool{false, true} {
				req := kmsg.RequestForKey(k)
				p := topicplant.Plant(req, byID)
				if !p.Any() {
					continue
				}
				req.SetVersion(v)
				checkTopicRules(t, fmt.Sprintf("%s v%d", kmsg.NameForKey(k), v), req, p)
			}
		}
	}
}

func checkTopicRules(t *testing.T, what string, req kmsg.Request, p topicplant.Planted) {
	t.Helper()
	c := request(t, req, "app")
	var rules []Rule
	var inFrame []string
	raw := kmsg.NewRequestFormatter(kmsg.FormatterClientID("app")).AppendRequest(nil, req, 42)
	for _, name := range p.Names {
		id, byID := idOf(p, name)
		if byID && !bytes.Contains(raw, id[:]) || !byID && !bytes.Contains(raw, []byte(name)) {
			continue // not in this version's encoding
		}
		if byID {
			learn(t, c, id, name)
		}
		inFrame = append(inFrame, name)
		rules = append(rules, Rule{Name: name, Action: ActionLog, Match: Selector{Topics: []string{name}}})
	}
	if len(rules) == 0 {
		return
	}
	e, m := newEngine(t, rules...)
	c.check(e, t0)
	for _, name := range inFrame {
		if count(m.matched, name) != 1 {
			t.Errorf("%s: topic %q in the request, not matched by its rule", what, name)
		}
	}
}

func idOf(p topicplant.Planted, name string) ([16]byte, bool) {
	for id, n := range p.IDs {
		if n == name {
			return id, true
		}
	}
	return [16]byte{}, false
}

// A topic named by an id kproxy has not learnt may be any topic: every
// rule selecting topics refuses it (allow-lists with except_topics too),
// with UNKNOWN_TOPIC_ID, never lets it by. A produce is refused on those
// partitions only, like a denied topic.
func TestTopicRuleUnknownIDFailsClosed(t *testing.T) {
	byID := func(key int16, v int16) kmsg.Request {
		req := kmsg.RequestForKey(key)
		topicplant.Plant(req, true)
		req.SetVersion(v)
		return req
	}
	for _, sel := range []Selector{{Topics: []string{"secret"}}, {ExceptTopics: []string{"public-*"}}} {
		e, _ := newEngine(t, deny("topics", sel))
		for _, c := range []struct {
			name string
			req  kmsg.Request
		}{
			{"Fetch v13", byID(1, 13)},
			{"Produce v13", byID(0, 13)},
			{"Metadata v12", byID(3, 12)},
			{"DeleteTopics v6", byID(20, 6)},
			{"OffsetCommit v10", byID(8, 10)},
			{"ShareFetch v1", byID(78, 1)},
			{"ConsumerGroupHeartbeat v1", owning()},
		} {
			v := request(t, c.req, "app").check(e, t0)
			if v.Outcome != Reject || v.Code != codeUnknownTopicID {
				t.Errorf("%+v, %s by ids not learnt: verdict %+v, want Reject 100", sel, c.name, v)
			}
			if c.req.Key() == framing.KeyProduce && len(v.Partitions) == 0 {
				t.Errorf("%+v, %s: no partitions refused", sel, c.name)
			}
		}
	}
}

// owning is a ConsumerGroupHeartbeat that names topics only as the ids of
// the partitions it owns.
func owning() kmsg.Request {
	hb := versioned(kmsg.NewPtrConsumerGroupHeartbeatRequest(), 1)
	hb.Group, hb.MemberID = "g", "m"
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: [16]byte{9}, Partitions: []int32{0}}}
	return hb
}

// A body kproxy cannot read, of an API that can name topics, might name
// any: a topic rule selects it (the relay then closes the connection, as
// it cannot answer in a layout it does not know). Of an API that names no
// topics, it is not the rule's business.
func TestTopicRuleUnreadableBody(t *testing.T) {
	e, _ := newEngine(t, deny("secret", Selector{Topics: []string{"secret"}}))
	c := request(t, fetch("orders"), "app")
	c.body = broken(t, c)
	if v := c.check(e, t0); v.Outcome != Reject {
		t.Fatalf("malformed Fetch: verdict %+v, want Reject", v)
	}
	c = request(t, versioned(kmsg.NewPtrFindCoordinatorRequest(), 3), "app")
	c.body = broken(t, c)
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("malformed FindCoordinator: verdict %+v, want Pass", v)
	}
}

// broken is c's body cut off, so that it no longer decodes.
func broken(t *testing.T, c call) *framing.Body {
	t.Helper()
	h := c.body.Header()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("app")).AppendRequest(nil, requestOf(t, c), 42)
	body := framing.NewBody(h, frame[:h.BodyOffset])
	if req, err := body.Request(); err == nil && req != nil {
		t.Fatal("a cut body still decodes")
	}
	return &body
}

func requestOf(t *testing.T, c call) kmsg.Request {
	t.Helper()
	req, err := c.body.Request()
	if err != nil || req == nil {
		t.Fatalf("decode: %v", err)
	}
	return req
}

// A rule on every request answers the ACL APIs with the cluster error even
// when their resource is a topic (a broker authorizes ACL changes against
// the cluster), and so the APIs only brokers send each other.
func TestAccessRejectClusterAPIsNamingTopics(t *testing.T) {
	acl := versioned(kmsg.NewPtrCreateACLsRequest(), 3)
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.Principal, c.Host = kmsg.ACLResourceTypeTopic, "orders", "User:x", "*"
	acl.Creations = append(acl.Creations, c)
	stop := versioned(kmsg.NewPtrStopReplicaRequest(), 3)
	topicplant.Plant(stop, false)
	e, _ := newEngine(t, deny("all", Selector{}))
	for _, req := range []kmsg.Request{acl, stop} {
		if v := request(t, req, "app").check(e, t0); v.Outcome != Reject || v.Code != codeClusterAuthorization {
			t.Errorf("%s: verdict %+v, want Reject 31", kmsg.NameForKey(req.Key()), v)
		}
	}
}
