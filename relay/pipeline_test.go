package relay

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// brokerAnswer is a broker's response frame to a forwarded request frame:
// resp encoded in the request's version, with kproxy's id.
func brokerAnswer(forwarded []byte, resp kmsg.Response) []byte {
	key := int16(binary.BigEndian.Uint16(forwarded[4:]))
	version := int16(binary.BigEndian.Uint16(forwarded[6:]))
	resp.SetVersion(version)
	f := make([]byte, 8, 64)
	copy(f[4:], forwarded[8:12])
	if framing.ResponseHeaderVersion(key, version) == 1 {
		f = append(f, 0) // no tags
	}
	f = resp.AppendTo(f)
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	return f
}

// decodeAnswer reads a response frame of key and version.
func decodeAnswer(t *testing.T, f []byte, key, version int16) kmsg.Response {
	t.Helper()
	off := framing.SizeLen + 4
	if framing.ResponseHeaderVersion(key, version) == 1 {
		off = skipTags(f, off)
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if off < 0 || resp.ReadFrom(f[off:]) != nil {
		t.Fatalf("undecodable %s v%d response %x", kmsg.NameForKey(key), version, f)
	}
	return resp
}

// Refusals answered by kproxy and responses from the broker share one
// connection: in a pipelined batch, every response must still come back
// in request order with its own correlation id (opaque ids, negative and
// extreme ones included), or clients that match by position break; and
// no refused request reaches the broker.
func TestPolicyPipelinedMixInOrder(t *testing.T) {
	s, l := newSession(t, 64, policy.Rule{Name: "no-deletes", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"DeleteTopics"}}})
	const n = 30
	type sent struct {
		corr         int32
		key, version int16
	}
	var want []sent
	var up Batch
	for i := 0; i < n; i++ {
		corr := int32(i*7919 - 100_000)
		switch i {
		case 0:
			corr = math.MinInt32
		case n - 1:
			corr = math.MaxInt32
		}
		var req kmsg.Request
		switch i % 3 {
		case 0:
			r := kmsg.NewPtrApiVersionsRequest()
			r.Version = 0
			req = r
		case 1:
			r := kmsg.NewPtrMetadataRequest()
			r.Version = 9
			req = r
		case 2:
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.Version = 4
			r.TimeoutMillis = 1000
			r.TopicNames = []string{"a", "b"}
			req = r
		}
		if err := s.Request(request(req, corr), &up, true); err != nil {
			t.Fatal(err)
		}
		want = append(want, sent{corr, req.Key(), req.GetVersion()})
	}
	s.CountRequests()
	for _, f := range up {
		if int16(binary.BigEndian.Uint16(f[4:])) == framing.KeyDeleteTopics {
			t.Fatal("a refused DeleteTopics was forwarded to the broker")
		}
	}
	if len(up) != 2*n/3 {
		t.Fatalf("%d requests forwarded, want %d", len(up), 2*n/3)
	}
	// The broker answers what it got, in order.
	for _, f := range up {
		var resp kmsg.Response = kmsg.NewPtrApiVersionsResponse()
		if int16(binary.BigEndian.Uint16(f[4:])) == framing.KeyMetadata {
			resp = kmsg.NewPtrMetadataResponse()
		}
		l.mu.Lock()
		err := s.Response(brokerAnswer(f, resp), &l.out)
		l.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	s.Written(true)
	if len(l.out) != n {
		t.Fatalf("%d responses written, want %d", len(l.out), n)
	}
	for i, w := range want {
		f := l.out[i]
		if got := corr(f, false); got != w.corr {
			t.Fatalf("response %d has correlation id %d, want %d (request order broken)", i, got, w.corr)
		}
		if r, ok := decodeAnswer(t, f, w.key, w.version).(*kmsg.DeleteTopicsResponse); ok {
			if len(r.Topics) != 2 {
				t.Fatalf("response %d: DeleteTopics answers %d topics, want 2", i, len(r.Topics))
			}
			for j, tp := range r.Topics {
				if tp.Topic == nil || *tp.Topic != []string{"a", "b"}[j] {
					t.Fatalf("response %d: topic %d is %v", i, j, tp.Topic)
				}
				if tp.ErrorCode != 29 && tp.ErrorCode != 31 {
					t.Fatalf("response %d: topic %s error %d, want 29 or 31", i, *tp.Topic, tp.ErrorCode)
				}
			}
		}
	}
	if s.InFlight() != 0 {
		t.Fatalf("%d left in flight", s.InFlight())
	}
}
