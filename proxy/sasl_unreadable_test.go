package proxy

import (
	"encoding/binary"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// gssapiBroker is a scripted broker for GSSAPI over SaslHandshake v0,
// whose rounds kproxy cannot count: it takes two raw tokens, answering
// each with a token, then takes frames as requests of any version (it is
// newer than kproxy), recording their keys and answering each with a bare
// response.
type gssapiBroker struct {
	mu     sync.Mutex
	tokens int // raw tokens still expected
	keys   []int16
}

func (b *gssapiBroker) handle(c net.Conn, f []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens > 0 {
		b.tokens--
		c.Write(append(binary.BigEndian.AppendUint32(nil, 4), 0x05, 0x04, 0x01, 0xff))
		return
	}
	key, version := int16(binary.BigEndian.Uint16(f[4:])), int16(binary.BigEndian.Uint16(f[6:]))
	if key == framing.KeySaslHandshake && version == 0 {
		hs := kmsg.NewPtrSASLHandshakeResponse()
		hs.SupportedMechanisms = []string{"GSSAPI"}
		echoResponse(c, f, hs.AppendTo(nil))
		b.tokens = 2
		return
	}
	b.keys = append(b.keys, key)
	echoResponse(c, f, nil)
}

func (b *gssapiBroker) took() []int16 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.keys)
}

// After GSSAPI tokens, whose rounds kproxy cannot count, a client sends
// DeleteTopics at a version the broker serves but kproxy's kmsg does not
// know. kproxy cannot judge it and must not relay it as a token: the
// connection is closed, counted as kproxy_protocol_errors_total
// {kind="sasl_unreadable_request"}, and the broker never gets it. Before,
// it went to the broker raw, past the rule refusing DeleteTopics.
func TestSaslGssapiUnreadableRequestCloses(t *testing.T) {
	b := &gssapiBroker{}
	up := startRawUpstream(t, b.handle)
	env := startProxy(t, up.addr())
	applyPolicies(t, env, policy.Rule{Name: "no-deletes", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"DeleteTopics"}}})
	c := dialRaw(t, env.addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 0, "GSSAPI"
	c.Write(encodeRequest(hs, 1))
	if f, err := readFrame(c); err != nil || corrOf(f) != 1 {
		t.Fatalf("handshake response: %x %v", f, err)
	}
	for _, tok := range [][]byte{
		{0x60, 0x82, 0x02, 0x7a, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02},
		{0x05, 0x04, 0x01, 0xff, 0x00, 0x0c, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 1},
	} {
		c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
		if f, err := readFrame(c); err != nil || len(f) != 8 {
			t.Fatalf("token answer: %x %v", f, err)
		}
	}

	// DeleteTopics one version past kproxy's kmsg, framed as its last
	// flexible version is (header v2), naming topic "victim".
	del := binary.BigEndian.AppendUint32(nil, 0)
	del = binary.BigEndian.AppendUint16(del, 20)
	del = binary.BigEndian.AppendUint16(del, uint16(framing.MaxVersion(20)+1))
	del = binary.BigEndian.AppendUint32(del, 7)
	del = append(del, 0, 5, 'a', 'd', 'm', 'i', 'n', 0)      // client id, no tags
	del = append(del, 2, 7, 'v', 'i', 'c', 't', 'i', 'm', 0) // one topic name
	del = append(del, 0, 0, 0x75, 0x30, 0)                   // timeout, no tags
	binary.BigEndian.PutUint32(del, uint32(len(del)-4))
	c.Write(del)
	if f, err := readFrame(c); err == nil {
		t.Fatalf("DeleteTopics v%d after GSSAPI was relayed and answered (%x); the broker took keys %v",
			framing.MaxVersion(20)+1, f, b.took())
	}
	if got := b.took(); len(got) != 0 {
		t.Fatalf("the broker took keys %v, want none", got)
	}
	waitFor(t, 5*time.Second, "the close to be counted", func() bool {
		return testutil.ToFloat64(env.m.ProtocolErrs.WithLabelValues("sasl_unreadable_request")) == 1
	})
	if want := "cannot read (API key 20 v" + strconv.Itoa(int(framing.MaxVersion(20)+1)) + ")"; !env.logs.contains(want) {
		t.Errorf("no log line saying %q", want)
	}
}
