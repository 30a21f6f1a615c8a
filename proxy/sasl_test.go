package proxy

import (
	"bytes"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

// saslV0Broker is a scripted broker for the SaslHandshake v0 flow, which
// kfake does not speak: it accepts PLAIN, takes the next frame as the raw
// token (closing the connection, as Kafka does, if it is not the one
// expected), answers it with an empty token, and from then on takes frames
// as Kafka requests, recording their api keys and answering each with an
// empty kmsg response of its type.
type saslV0Broker struct {
	token []byte
	mu    sync.Mutex
	raw   bool
	keys  []int16 // api keys of the requests taken after authentication
}

func (b *saslV0Broker) handle(c net.Conn, f []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.raw {
		b.raw = false
		if !bytes.Equal(f[4:], b.token) {
			c.Close() // authentication failed
			return
		}
		c.Write([]byte{0, 0, 0, 0})
		return
	}
	key, version := int16(binary.BigEndian.Uint16(f[4:])), int16(binary.BigEndian.Uint16(f[6:]))
	if key == 17 && version == 0 {
		hs := kmsg.NewPtrSASLHandshakeResponse()
		hs.SupportedMechanisms = []string{"PLAIN"}
		echoResponse(c, f, hs.AppendTo(nil))
		b.raw = true
		return
	}
	b.keys = append(b.keys, key)
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	echoResponse(c, f, resp.AppendTo(nil))
}

func (b *saslV0Broker) took(key int16) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, k := range b.keys {
		if k == key {
			n++
		}
	}
	return n
}

// A client that pipelines requests behind its SASL v0 token, in the same
// write, must not get them past the rules: each waits until the token is
// answered and is then judged, counted and traced as a request. Before,
// every frame while a token was expected was relayed raw, and three
// DeleteTopics reached the broker although a rule refuses them.
func TestSaslV0PipelinedRequestsPassRules(t *testing.T) {
	for _, oneWrite := range []bool{false, true} {
		name := "token-and-requests"
		if oneWrite {
			name = "handshake-token-and-requests" // all behind the handshake too
		}
		t.Run(name, func(t *testing.T) {
			plain := []byte("\x00alice\x00secret")
			b := &saslV0Broker{token: plain}
			up := startRawUpstream(t, b.handle)
			tr, flush := newTestTracer(t, nil)
			env := startTracedProxy(t, up.addr(), tr)
			ps := applyPolicies(t, env, policy.Rule{Name: "no-deletes", Action: policy.ActionReject,
				Match: policy.Selector{APIs: []string{"DeleteTopics"}}})
			c := dialRaw(t, env.addr)
			c.SetDeadline(time.Now().Add(10 * time.Second))

			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 0, "PLAIN"
			var batch []byte
			if oneWrite {
				batch = encodeRequest(hs, 1)
			} else {
				c.Write(encodeRequest(hs, 1))
				if f, err := readFrame(c); err != nil || corrOf(f) != 1 {
					t.Fatalf("handshake response: %x %v", f, err)
				}
			}
			batch = append(binary.BigEndian.AppendUint32(batch, uint32(len(plain))), plain...)
			for i := range 3 {
				del := kmsg.NewPtrDeleteTopicsRequest()
				del.Version, del.TopicNames = 1, []string{"victim"}
				batch = append(batch, encodeRequest(del, int32(10+i))...)
			}
			c.Write(batch)

			if oneWrite {
				if f, err := readFrame(c); err != nil || corrOf(f) != 1 {
					t.Fatalf("handshake response: %x %v", f, err)
				}
			}
			if f, err := readFrame(c); err != nil || len(f) != 4 {
				t.Fatalf("token answer: %x %v", f, err)
			}
			var codes []int16
			for i := range 3 {
				f, err := readFrame(c)
				if err != nil {
					t.Fatalf("DeleteTopics response %d: %v (the broker took %d DeleteTopics)", i, err, b.took(20))
				}
				if corrOf(f) != int32(10+i) {
					t.Fatalf("DeleteTopics response %d has id %d", i, corrOf(f))
				}
				resp := decodeResponse(t, f, 20, 1).(*kmsg.DeleteTopicsResponse)
				for _, tp := range resp.Topics {
					codes = append(codes, tp.ErrorCode)
				}
			}
			if n := b.took(20); n != 0 {
				t.Fatalf("%d DeleteTopics pipelined behind the SASL token reached the broker despite the rule", n)
			}
			if !slices.Equal(codes, []int16{29, 29, 29}) {
				t.Fatalf("DeleteTopics error codes %v, want kproxy's TOPIC_AUTHORIZATION_FAILED (29) for each", codes)
			}
			if n := env.requests("DeleteTopics"); n != 3 {
				t.Fatalf("kproxy counted %v DeleteTopics requests, want 3", n)
			}
			if n := ps.count(t, "kproxy_policy_rejected_total", "no-deletes"); n != 3 {
				t.Fatalf("rejected counter = %v, want 3", n)
			}
			if evs := policyEvents(flush(), "20"); len(evs) != 3 {
				t.Fatalf("%d DeleteTopics spans with a policy event, want 3", len(evs))
			}

			// Authenticated: requests are relayed and answered as usual.
			av := kmsg.NewPtrApiVersionsRequest()
			c.Write(encodeRequest(av, 77))
			if f, err := readFrame(c); err != nil || corrOf(f) != 77 {
				t.Fatalf("request after SASL: %x %v", f, err)
			}
		})
	}
}
