package policy

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// An API allow-list: everything but the listed APIs is refused.
func TestAllowListAPIs(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "only-data", Action: ActionReject,
		Match: Selector{ExceptAPIs: []string{"ApiVersions", "Metadata", "Produce", "Fetch"}}})
	if v := request(t, produce("orders"), "app").check(e, t0); v.Outcome != Pass {
		t.Fatalf("listed API: %+v, want Pass", v)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(4)
	del.TopicNames = []string{"orders"}
	if v := request(t, del, "app").check(e, t0); v.Outcome != Reject || v.Code != 29 {
		t.Fatalf("unlisted API: %+v, want Reject 29", v)
	}
}

// A topic allow-list for produce: partitions of other topics are refused,
// those of allowed topics go through in the same request.
func TestAllowListTopics(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "orders-only", Action: ActionReject,
		Match: Selector{APIs: []string{"Produce"}, ExceptTopics: []string{"orders*"}}})
	if v := request(t, produce("orders", "orders-eu"), "app").check(e, t0); v.Outcome != Pass {
		t.Fatalf("allowed topics: %+v, want Pass", v)
	}
	v := request(t, produce("orders", "audit"), "app").check(e, t0)
	if v.Outcome != Reject || v.Code != 29 || len(v.Partitions) != 1 || v.Partitions[0].Topic != "audit" {
		t.Fatalf("mixed topics: %+v, want audit's partition refused with 29", v)
	}
}

// The listener selector matches the address the request arrived on.
func TestListenerSelector(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "internal", Action: ActionReject, Match: Selector{Listener: "127.0.0.1:9093"}})
	c := request(t, produce("orders"), "app")
	c.r.Listener = "127.0.0.1:9092"
	if v := c.check(e, t0); v.Outcome != Pass {
		t.Fatalf("other listener: %+v, want Pass", v)
	}
	c.r.Listener = "127.0.0.1:9093"
	if v := c.check(e, t0); v.Outcome != Reject {
		t.Fatalf("selected listener: %+v, want Reject", v)
	}
}

// key: topic meters the bytes produced to each topic on its own bucket,
// across clients.
func TestTopicKeyedProduceRate(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "per-topic", Action: ActionThrottle,
		Match: Selector{APIs: []string{"Produce"}}, Limits: Limits{BytesPerSecond: 1000, Key: "topic"}})
	big := func(topic string) *kmsg.ProduceRequest {
		r := produce(topic)
		r.Topics[0].Partitions[0].Records = make([]byte, 1500)
		return r
	}
	if v := request(t, big("a"), "c1").check(e, t0); v.Outcome != Throttle || v.Delay != 500*time.Millisecond {
		t.Fatalf("1500 B to a at 1000 B/s: %+v, want Throttle 500ms", v)
	}
	if v := request(t, big("a"), "c2").check(e, t0); v.Outcome != Throttle || v.Delay != 2*time.Second {
		t.Fatalf("another client on the same topic: %+v, want Throttle 2s", v)
	}
	if v := request(t, big("b"), "c1").check(e, t0); v.Delay != 500*time.Millisecond {
		t.Fatalf("another topic: %+v, want its own bucket (500ms)", v)
	}
}
