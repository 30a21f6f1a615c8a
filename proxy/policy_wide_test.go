package proxy

import (
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/topicplant"
)

// aclNames are the topic ACL resources the broker holds, read through c.
func aclNames(t *testing.T, c net.Conn, corr int32) []string {
	t.Helper()
	d := versioned(kmsg.NewPtrDescribeACLsRequest(), 3)
	d.ResourceType, d.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeAny
	d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp := ask(t, c, d, corr).(*kmsg.DescribeACLsResponse)
	var names []string
	for _, r := range resp.Resources {
		names = append(names, r.ResourceName)
	}
	slices.Sort(names)
	return names
}

// Under a rule refusing topic "secret", ACL requests that may cover it
// without naming it literally (a filter of type ANY, a null name, an ACL
// on "*" or on a prefix) and ElectLeaders of every partition are refused
// with CLUSTER_AUTHORIZATION_FAILED and never reach the broker; the
// broker's ACLs are as they were. An ACL on another topic by its literal
// name goes through. Before, all of them reached kfake.
func TestPolicyTopicRuleWideRequests(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "secret", "public")})
	c := dialRaw(t, env.addr)
	corr := int32(1)
	const (
		topic, any           = kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeAny
		literal, prefixed    = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
		match, anyPattern    = kmsg.ACLResourcePatternTypeMatch, kmsg.ACLResourcePatternTypeAny
		topicAuthorization   = 29
		clusterAuthorization = 31
	)
	if got := framing.FirstError(ask(t, c, topicplant.ACLBinding(topic, "secret", literal), corr)); got != 0 {
		t.Fatalf("seeding the ACL on secret: error %d", got)
	}
	ps := applyPolicies(t, env, noSecret)
	secret := "secret"
	for _, r := range []struct {
		req  kmsg.Request
		want int16
	}{
		{topicplant.ACLFilter(any, &secret, literal), topicAuthorization}, // names secret
		{topicplant.ACLFilter(topic, nil, literal), clusterAuthorization},
		{topicplant.ACLFilter(topic, nil, anyPattern), clusterAuthorization},
		{topicplant.ACLFilter(topic, &secret, match), clusterAuthorization},
		{topicplant.ACLBinding(topic, "*", literal), clusterAuthorization},
		{topicplant.ACLBinding(topic, "sec", prefixed), clusterAuthorization},
		{versioned(kmsg.NewPtrElectLeadersRequest(), 2), clusterAuthorization}, // null topics: every partition
	} {
		corr++
		if got := framing.FirstError(ask(t, c, r.req, corr)); got != r.want {
			t.Errorf("%s (corr %d): error %d, want %d from kproxy", kmsg.NameForKey(r.req.Key()), corr, got, r.want)
		}
	}
	corr++
	if got := framing.FirstError(ask(t, c, topicplant.ACLBinding(topic, "public", literal), corr)); got != 0 {
		t.Errorf("CreateAcls on public: error %d, want it to reach the broker", got)
	}
	ps.reload(t, env)
	corr++
	if got := aclNames(t, c, corr); !slices.Equal(got, []string{"public", "secret"}) {
		t.Errorf("topic ACLs on the broker %q, want [public secret]: a refused request reached it", got)
	}
}

// apiVersionsBroker is a scripted broker newer than kproxy: its
// ApiVersions answer offers an API key kproxy's kmsg does not know, and
// it records every other request's key, answering with a bare response.
type apiVersionsBroker struct {
	mu   sync.Mutex
	keys []int16
}

func (b *apiVersionsBroker) handle(c net.Conn, f []byte) {
	key := int16(binary.BigEndian.Uint16(f[4:]))
	if key == framing.KeyApiVersions {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
			{ApiKey: 3, MaxVersion: 12}, {ApiKey: 18, MaxVersion: 3}, {ApiKey: kmsg.MaxKey + 1, MaxVersion: 0},
		}
		echoResponse(c, f, resp.AppendTo(nil)) // v0: readable at any version
		return
	}
	b.mu.Lock()
	b.keys = append(b.keys, key)
	b.mu.Unlock()
	echoResponse(c, f, nil)
}

func (b *apiVersionsBroker) took() []int16 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.keys)
}

// offered are the API keys of an ApiVersions v0 answer through c.
func offered(t *testing.T, c net.Conn, corr int32) []int16 {
	t.Helper()
	var keys []int16
	for _, k := range ask(t, c, kmsg.NewPtrApiVersionsRequest(), corr).(*kmsg.ApiVersionsResponse).ApiKeys {
		keys = append(keys, k.ApiKey)
	}
	return keys
}

// A broker newer than kproxy may serve an API kproxy does not know, which
// may name any topic. With no rules it is offered and relayed as is;
// under a topic rule it is taken off the ApiVersions answer, and a client
// that sends it anyway is closed (kproxy cannot answer in its layout):
// the broker never gets it. Before, the rule did not apply and the
// broker ran it.
func TestPolicyTopicRuleUnknownAPI(t *testing.T) {
	b := &apiVersionsBroker{}
	up := startRawUpstream(t, b.handle) // it takes api keys kmsg does not know
	env := startProxy(t, up.addr())
	unknown := int16(kmsg.MaxKey + 1)
	frame := func(corr int32) []byte {
		f := binary.BigEndian.AppendUint32(nil, 0)
		f = binary.BigEndian.AppendUint16(f, uint16(unknown))
		f = binary.BigEndian.AppendUint16(f, 0)
		f = binary.BigEndian.AppendUint32(f, uint32(corr))
		f = append(f, 0, 3, 'a', 'p', 'p', 0, 6, 's', 'e', 'c', 'r', 'e', 't')
		binary.BigEndian.PutUint32(f, uint32(len(f)-4))
		return f
	}

	free := dialRaw(t, env.addr)
	if keys := offered(t, free, 1); !slices.Contains(keys, unknown) {
		t.Fatalf("no rules: keys offered %v, want %d kept", keys, unknown)
	}
	free.Write(frame(2))
	if f, err := readFrame(free); err != nil || corrOf(f) != 2 {
		t.Fatalf("no rules: answer to key %d: %x %v", unknown, f, err)
	}

	applyPolicies(t, env, noSecret)
	c := dialRaw(t, env.addr)
	if keys := offered(t, c, 1); slices.Contains(keys, unknown) || !slices.Contains(keys, int16(3)) {
		t.Errorf("under a topic rule: keys offered %v, want %d dropped and the rest kept", keys, unknown)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(frame(2))
	if f, err := readFrame(c); err == nil {
		t.Fatalf("under a topic rule, key %d was answered (%x); the broker took %v", unknown, f, b.took())
	}
	if got := b.took(); !slices.Equal(got, []int16{unknown}) {
		t.Fatalf("the broker took keys %v, want only the one sent with no rules", got)
	}
}
