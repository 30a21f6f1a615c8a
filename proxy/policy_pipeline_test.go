package proxy

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

// Refusals answered by kproxy and responses from the broker share one
// connection: in a pipelined batch, every response must still come back
// in request order with its own correlation id (opaque ids, negative and
// extreme ones included), or clients that match by position break.
func TestPolicyPipelinedMixInOrder(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "a", "b")})
	applyPolicies(t, env, policy.Rule{Name: "no-deletes", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"DeleteTopics"}}})
	const n = 30
	type sent struct {
		corr         int32
		key, version int16
	}
	var batch []byte
	var want []sent
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
		batch = append(batch, encodeRequest(req, corr)...)
		want = append(want, sent{corr, req.Key(), req.GetVersion()})
	}
	c := dialRaw(t, env.addr)
	if _, err := c.Write(batch); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i, w := range want {
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d of %d: %v", i, n, err)
		}
		if got := corrOf(f); got != w.corr {
			t.Fatalf("response %d has correlation id %d, want %d (request order broken)", i, got, w.corr)
		}
		resp := decodeResponse(t, f, w.key, w.version)
		switch r := resp.(type) {
		case *kmsg.ApiVersionsResponse:
			if r.ErrorCode != 0 {
				t.Fatalf("response %d: ApiVersions error %d", i, r.ErrorCode)
			}
		case *kmsg.MetadataResponse:
			// Metadata after a refused delete still lists its topics.
			names := map[string]bool{}
			for _, tp := range r.Topics {
				names[*tp.Topic] = true
			}
			if !names["a"] || !names["b"] {
				t.Fatalf("response %d: Metadata lists %v: a refused delete reached the broker", i, names)
			}
		case *kmsg.DeleteTopicsResponse:
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
	if got := env.requests("DeleteTopics"); got != n/3 {
		t.Fatalf("kproxy counted %v DeleteTopics, want %d", got, n/3)
	}
}
