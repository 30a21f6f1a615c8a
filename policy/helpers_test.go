package policy

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// t0 is a fixed clock: tests move time by hand instead of sleeping.
var t0 = time.Unix(1_700_000_000, 0)

// newEngine validates and compiles rules with metrics on a fresh registry,
// so counters start at zero in every test.
func newEngine(t testing.TB, rules ...Rule) (*Engine, *Metrics) {
	t.Helper()
	c := Config{Rules: rules}
	if err := c.Validate(); err != nil {
		t.Fatalf("invalid test config: %v", err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	return New(c, m), m
}

// call is one request as the relay hands it to Check.
type call struct {
	r    *Request
	body *framing.Body
}

// request frames req the way a client would, then parses it back the way
// the relay does, so Check sees exactly what it sees in production.
func request(t testing.TB, req kmsg.Request, clientID string) call {
	t.Helper()
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, 42)
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		t.Fatalf("parse header: %v", err)
	}
	body := framing.NewBody(h, frame)
	return call{&Request{Key: h.APIKey, Version: h.APIVersion, ClientID: string(h.ClientID),
		Bytes: len(frame), Topics: framing.NewTopicIDs(), Conn: &ConnState{}}, &body}
}

// check runs the engine on c at now; the body's decode is shared between
// calls, as it is between the tracer and the policies.
func (c call) check(e *Engine, now time.Time) Verdict { return e.Check(c.r, c.body, now) }

// produce is a Produce v7 request writing one partition of each topic.
func produce(topics ...string) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.SetVersion(7)
	r.Acks = 1
	for _, name := range topics {
		t := kmsg.NewProduceRequestTopic()
		t.Topic = name
		p := kmsg.NewProduceRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
	}
	return r
}

// fetch is a Fetch v11 request reading one partition of each topic.
func fetch(topics ...string) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.SetVersion(11)
	for _, name := range topics {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = name
		t.Partitions = append(t.Partitions, kmsg.NewFetchRequestTopicPartition())
		r.Topics = append(r.Topics, t)
	}
	return r
}

// metadata is a Metadata v9 request; no topics means all topics.
func metadata(topics ...string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.SetVersion(9)
	for _, name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		r.Topics = append(r.Topics, t)
	}
	return r
}

// versioned sets a message's version, for one-line construction.
func versioned[R interface{ SetVersion(int16) }](r R, v int16) R {
	r.SetVersion(v)
	return r
}

// count reads one rule's counter from a vector.
func count(v *prometheus.CounterVec, rule string) float64 {
	return testutil.ToFloat64(v.WithLabelValues(rule))
}

// near reports whether two durations differ by at most tol.
func near(a, b, tol time.Duration) bool {
	d := a - b
	return d <= tol && -d <= tol
}
