package proxy

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

// fetchV11 asks for partition 0 of topic from offset 0, waiting at most
// 1 ms for data.
func fetchV11(topic string) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.Version = 11
	r.ReplicaID = -1
	r.MaxWaitMillis = 1
	r.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	fp.LogStartOffset = -1
	ft.Partitions = append(ft.Partitions, fp)
	r.Topics = append(r.Topics, ft)
	return r
}

// A Java consumer dies on POLICY_VIOLATION in a Fetch, so a reject-rate
// rule must throttle Fetch instead: answers carry throttle_time_ms and no
// error 44. The forwarded fetches still count against the rate, so a
// client that ignores throttle_time_ms (this raw one) is held to it by
// kproxy's mute.
func TestPolicyFetchOverRejectRateIsThrottled(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "f")})
	const perSecond, window = 2.0, 3 * time.Second
	ps := applyPolicies(t, env, policy.Rule{Name: "fetch-rate", Action: policy.ActionReject,
		Match:  policy.Selector{APIs: []string{"Fetch"}},
		Limits: policy.Limits{RequestsPerSecond: perSecond, Key: "connection"}})
	c := dialRaw(t, env.addr)
	start := time.Now()
	answered, throttled := 0, 0
	for corr := int32(0); time.Since(start) < window; corr++ {
		if _, err := c.Write(encodeRequest(fetchV11("f"), corr)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("fetch %d: %v", corr, err)
		}
		r := decodeResponse(t, f, 1, 11).(*kmsg.FetchResponse)
		if r.ErrorCode == 44 {
			t.Fatalf("fetch %d answered with POLICY_VIOLATION", corr)
		}
		for _, tp := range r.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 0 {
					t.Fatalf("fetch %d: partition error %d", corr, p.ErrorCode)
				}
			}
		}
		answered++
		if r.ThrottleMillis > 0 {
			throttled++
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d fetches answered in %v at %v/s, %d throttled", answered, elapsed.Round(time.Millisecond), perSecond, throttled)
	if throttled == 0 {
		t.Fatal("no fetch response carried throttle_time_ms")
	}
	if n := ps.count(t, "kproxy_policy_rejected_total", "fetch-rate"); n != 0 {
		t.Fatalf("rejected counter = %v for Fetch, want 0", n)
	}
	if n := ps.count(t, "kproxy_policy_throttled_total", "fetch-rate"); n == 0 {
		t.Fatal("throttled counter not raised")
	}
	// One second's burst plus the rate over the time spent, one in flight
	// when the window closed, and one for timing slack. (Charging the
	// forwarded fetches gives 9 here; not charging them gives 14.)
	if most := int(perSecond*(1+elapsed.Seconds())) + 2; answered > most {
		t.Fatalf("%d fetches answered in %v, at most %d fit %v/s: throttled fetches are relayed without being charged to the bucket",
			answered, elapsed.Round(time.Millisecond), most, perSecond)
	}
}
