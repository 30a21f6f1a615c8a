package policy

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// throttled are responses that carry throttle_time_ms, each in a different
// place: Produce after its topics, ApiVersions after error_code and keys,
// Fetch and Metadata first; ApiVersions v3 and Metadata v9 are flexible.
func throttled() []kmsg.Response {
	p := versioned(kmsg.NewPtrProduceResponse(), 7)
	pt := kmsg.NewProduceResponseTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceResponseTopicPartition()
	pp.Partition, pp.BaseOffset = 3, 1234
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)

	f := versioned(kmsg.NewPtrFetchResponse(), 11)
	f.SessionID = 99

	m := versioned(kmsg.NewPtrMetadataResponse(), 9)
	mb := kmsg.NewMetadataResponseBroker()
	mb.NodeID, mb.Host, mb.Port = 1, "broker-1", 9092
	m.Brokers = append(m.Brokers, mb)

	a := versioned(kmsg.NewPtrApiVersionsResponse(), 3)
	ak := kmsg.NewApiVersionsResponseApiKey()
	ak.ApiKey, ak.MaxVersion = 0, 11
	a.ApiKeys = append(a.ApiKeys, ak)
	return []kmsg.Response{p, f, m, a}
}

// WithThrottle raises throttle_time_ms and keeps the correlation id and
// the rest of the body.
func TestWithThrottleRaises(t *testing.T) {
	for _, resp := range throttled() {
		name := kmsg.NameForKey(resp.Key())
		resp.(kmsg.SetThrottleResponse).SetThrottle(100)
		frame := EncodeResponse(resp, -12345)
		out := WithThrottle(frame, resp.Key(), resp.GetVersion(), 1500*time.Millisecond+200*time.Microsecond)
		back, err := framing.DecodeResponse(out, resp.Key(), resp.GetVersion())
		if err != nil || back == nil {
			t.Fatalf("%s: does not decode: %v", name, err)
		}
		if got, _ := back.(kmsg.ThrottleResponse).Throttle(); got != 1501 {
			t.Fatalf("%s: throttle_time_ms %d, want 1501", name, got)
		}
		if got := framing.ResponseCorrelationID(out); got != -12345 {
			t.Fatalf("%s: correlation id %d, want -12345", name, got)
		}
		// Apart from the throttle, the response is what the broker sent.
		back.(kmsg.SetThrottleResponse).SetThrottle(100)
		if string(EncodeResponse(back, -12345)) != string(frame) {
			t.Fatalf("%s: body changed beyond throttle_time_ms", name)
		}
	}
}

// A response that already asks for at least as long is relayed as is,
// without re-encoding.
func TestWithThrottleKeepsLongerThrottle(t *testing.T) {
	for _, resp := range throttled() {
		resp.(kmsg.SetThrottleResponse).SetThrottle(5000)
		frame := EncodeResponse(resp, 7)
		for _, d := range []time.Duration{time.Second, 4999 * time.Millisecond} {
			out := WithThrottle(frame, resp.Key(), resp.GetVersion(), d)
			if len(out) != len(frame) || &out[0] != &frame[0] {
				t.Fatalf("%s, %v: a new frame, want the same slice", kmsg.NameForKey(resp.Key()), d)
			}
		}
	}
}

// Responses without a throttle field, and frames that do not decode, are
// returned unchanged.
func TestWithThrottleNoField(t *testing.T) {
	sasl := versioned(kmsg.NewPtrSASLHandshakeResponse(), 1)
	sasl.SupportedMechanisms = []string{"PLAIN"}
	frame := EncodeResponse(sasl, 7)
	if out := WithThrottle(frame, sasl.Key(), 1, time.Second); &out[0] != &frame[0] || len(out) != len(frame) {
		t.Fatal("SaslHandshake: changed, want the same slice")
	}
	garbage := []byte{0, 0, 0, 6, 0, 0, 0, 7, 0xff, 0xff}
	if out := WithThrottle(garbage, framing.KeyProduce, 7, time.Second); &out[0] != &garbage[0] {
		t.Fatal("undecodable frame: changed, want the same slice")
	}
	if out := WithThrottle(frame, framing.KeyProduce, 999, time.Second); &out[0] != &frame[0] {
		t.Fatal("unknown version: changed, want the same slice")
	}
}

// A fraction of a millisecond rounds up: the client must never be told
// to wait less than kproxy holds it.
func TestWithThrottleRoundsUp(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want int32
	}{
		{1200 * time.Microsecond, 2},
		{time.Microsecond, 1},
		{999*time.Millisecond + 1, 1000},
		{100 * 24 * time.Hour, 1<<31 - 1}, // clamped to int32
	}
	for _, c := range cases {
		f := versioned(kmsg.NewPtrFetchResponse(), 11)
		out := WithThrottle(EncodeResponse(f, 1), 1, 11, c.d)
		back, _ := framing.DecodeResponse(out, 1, 11)
		if got := back.(*kmsg.FetchResponse).ThrottleMillis; got != c.want {
			t.Fatalf("%v: throttle_time_ms %d, want %d", c.d, got, c.want)
		}
		if time.Duration(back.(*kmsg.FetchResponse).ThrottleMillis)*time.Millisecond < c.d && c.want != 1<<31-1 {
			t.Fatalf("%v: under-reported", c.d)
		}
	}
}
