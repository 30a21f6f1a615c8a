package policy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// An access rule refuses the way a broker's authorizer would: requests
// that name topics get TOPIC_AUTHORIZATION_FAILED, cluster-level requests
// CLUSTER_AUTHORIZATION_FAILED.
func TestAccessRejectCodes(t *testing.T) {
	deleteByName := versioned(kmsg.NewPtrDeleteTopicsRequest(), 4)
	deleteByName.TopicNames = []string{"orders"}
	deleteV6 := versioned(kmsg.NewPtrDeleteTopicsRequest(), 6)
	deleteV6.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	create := versioned(kmsg.NewPtrCreateTopicsRequest(), 5)
	create.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "orders", NumPartitions: 1, ReplicationFactor: 1}}
	createAcls := versioned(kmsg.NewPtrCreateACLsRequest(), 2)
	createAcls.Creations = []kmsg.CreateACLsRequestCreation{{ResourceName: "orders", Principal: "User:x", Host: "*"}}
	deleteAcls := versioned(kmsg.NewPtrDeleteACLsRequest(), 2)
	deleteAcls.Filters = []kmsg.DeleteACLsRequestFilter{kmsg.NewDeleteACLsRequestFilter()}

	cases := []struct {
		name string
		req  kmsg.Request
		code int16
	}{
		{"Produce", produce("orders"), 29},
		{"Fetch", fetch("orders"), 29},
		{"Metadata with topics", metadata("orders"), 29},
		{"DeleteTopics v4 by name", deleteByName, 29},
		{"DeleteTopics v6 by name", deleteV6, 29},
		{"CreateTopics", create, 29},
		{"CreateAcls", createAcls, 31},
		{"DeleteAcls", deleteAcls, 31},
		{"DescribeCluster", versioned(kmsg.NewPtrDescribeClusterRequest(), 0), 31},
		// All topics names none: the refusal is cluster-wide.
		{"Metadata all topics", metadata(), 31},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, m := newEngine(t, deny("no", Selector{}))
			v := request(t, c.req, "app-1").check(e, t0)
			if v.Outcome != Reject || v.Code != c.code || v.Rule != "no" || v.Delay != 0 {
				t.Fatalf("verdict %+v, want Reject with code %d by rule no", v, c.code)
			}
			if v.Reason == "" {
				t.Fatal("a refusal must say why")
			}
			if got := count(m.rejected, "no"); got != 1 {
				t.Fatalf("rejected counter %v, want 1", got)
			}
		})
	}
}

// A rule with a topic selector always refuses with the topic error, even
// for an API whose other requests would get the cluster one.
func TestAccessRejectTopicRule(t *testing.T) {
	e, _ := newEngine(t, deny("secret", Selector{Topics: []string{"secret*"}}))
	if v := request(t, produce("orders", "secret.keys"), "app-1").check(e, t0); v.Outcome != Reject || v.Code != 29 {
		t.Fatalf("verdict %+v, want Reject 29", v)
	}
	if v := request(t, produce("orders"), "app-1").check(e, t0); v.Outcome != Pass {
		t.Fatalf("other topic: verdict %+v, want Pass", v)
	}
}

// learn teaches c's topic cache an id, through a Metadata response as the
// relay does.
func learn(t *testing.T, c call, id [16]byte, name string) {
	t.Helper()
	md := versioned(kmsg.NewPtrMetadataResponse(), 12)
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = kmsg.StringPtr(name), id
	md.Topics = append(md.Topics, mt)
	c.r.Topics.Learn(EncodeResponse(md, 1), 12)
	if got := c.r.Topics.Name(id); got != name {
		t.Fatalf("topic cache learnt %q, want %q", got, name)
	}
}

// Topic rules see topics named by id (Fetch v13+) once Metadata has
// taught kproxy the id; before, the id may be any topic, and the rule
// refuses it with UNKNOWN_TOPIC_ID, which sends the client to refresh its
// metadata (through kproxy, which learns the id) and retry.
func TestAccessRejectFetchByTopicID(t *testing.T) {
	f := versioned(kmsg.NewPtrFetchRequest(), 13)
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = [16]byte{1}
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	f.Topics = append(f.Topics, ft)
	e, _ := newEngine(t, deny("secret", Selector{Topics: []string{"secret*"}}))
	c := request(t, f, "app-1")
	if v := c.check(e, t0); v.Outcome != Reject || v.Code != 100 {
		t.Fatalf("unknown id: verdict %+v, want Reject 100 (UNKNOWN_TOPIC_ID)", v)
	}
	c = request(t, f, "app-1")
	learn(t, c, [16]byte{1}, "secret.keys")
	if v := c.check(e, t0); v.Outcome != Reject || v.Code != 29 {
		t.Fatalf("known id: verdict %+v, want Reject 29", v)
	}
	c = request(t, f, "app-1")
	learn(t, c, [16]byte{1}, "orders")
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("id of another topic: verdict %+v, want Pass", v)
	}
}

// DeleteTopics v6+ can name topics by id only: the id is resolved like
// any other.
func TestAccessRejectDeleteTopicsByID(t *testing.T) {
	del := versioned(kmsg.NewPtrDeleteTopicsRequest(), 6)
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: [16]byte{1}}}
	e, _ := newEngine(t, deny("secret", Selector{APIs: []string{"DeleteTopics"}, Topics: []string{"secret*"}}))
	c := request(t, del, "admin")
	learn(t, c, [16]byte{1}, "secret.keys")
	if v := c.check(e, t0); v.Outcome != Reject || v.Code != 29 {
		t.Fatalf("verdict %+v, want Reject 29", v)
	}
}

// An access rule that names Heartbeat refuses it: the rate exemption is
// for rates only, and an operator who lists the API means it.
func TestAccessRejectNamedHeartbeat(t *testing.T) {
	e, _ := newEngine(t, deny("no-groups", Selector{APIs: []string{"Heartbeat", "ConsumerGroupHeartbeat"}}))
	for _, req := range []kmsg.Request{versioned(kmsg.NewPtrHeartbeatRequest(), 4), versioned(kmsg.NewPtrConsumerGroupHeartbeatRequest(), 0)} {
		v := request(t, req, "app-1").check(e, t0)
		// A broker refuses group APIs with GROUP_AUTHORIZATION_FAILED.
		if v.Outcome != Reject || v.Code != 30 {
			t.Fatalf("%s: verdict %+v, want Reject 30", kmsg.NameForKey(req.Key()), v)
		}
	}
}
