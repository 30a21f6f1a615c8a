package cluster_test

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/relay"
)

// What cluster mode adds to relaying a Produce or a Fetch, measured where
// end-to-end runs on a shared machine cannot resolve it: the relay's own
// work (relay.Session: the in-flight table, correlation ids, counters,
// and in cluster mode the address rewriter's walk) with no transport.
// Each benchmark relays the same load through single-broker sessions and
// cluster-mode sessions in alternating blocks of a few microseconds, so a
// noisy moment on the machine falls on both alike, and reports each
// one's ns per request/response pair and the ratio, beside allocs/op
// (which must stay 0).

// nopLink is a driver that never waits: every batch is taken at once.
type nopLink struct{}

func (nopLink) FlushUp(up *relay.Batch) error { up.Reset(); return nil }
func (nopLink) Unread() int                   { return 0 }
func (nopLink) WaitStart()                    {}
func (nopLink) WaitEnd()                      {}
func (nopLink) Released()                     {}
func (nopLink) Gone() bool                    { return false }
func (nopLink) Answer(bool) error             { return nil }

// relayLoad is one shape of kbench's load: conns sessions, each with
// depth requests in flight, relayed a batch at a time.
type relayLoad struct {
	conns, depth int
	req          func() kmsg.Request
	resp         func() kmsg.Response
}

// pairs is one side of the A/B: its sessions, and each one's request
// and response frames.
type pairs struct {
	sess  []*relay.Session
	reqs  [][][]byte // [conn][i]: a request frame, given the session's id on the way up
	resps [][][]byte // [conn][i]: its response frame
	up    relay.Batch
	out   relay.Batch
}

// newPairs makes the sessions of one side and relays warm rounds on them
// (they must succeed).
func newPairs(tb testing.TB, l relayLoad, addrs relay.AddressRewriter, warm int) *pairs {
	var rules atomic.Pointer[policy.Engine]
	env := &relay.Env{Framing: framing.Defaults(), Table: correlate.Config{MaxInFlight: l.depth},
		Metrics: relay.NewMetrics(prometheus.NewRegistry()), Topics: framing.NewTopicIDs(),
		Policies: &rules, Listener: "127.0.0.1:9092", Addresses: addrs}
	p := &pairs{}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kbench"))
	for c := 0; c < l.conns; c++ {
		p.sess = append(p.sess, relay.New(env, nopLink{}, zerolog.Nop(), nil))
		var reqs, resps [][]byte
		for i := 0; i < l.depth; i++ {
			reqs = append(reqs, f.AppendRequest(nil, l.req(), int32(i)))
			body := l.resp().AppendTo(nil)
			r := make([]byte, 8, 9+len(body))
			binary.BigEndian.PutUint32(r, uint32(4+len(body)))
			if l.resp().IsFlexible() {
				r = append(r, 0) // the response header's empty tag section
				binary.BigEndian.PutUint32(r, uint32(5+len(body)))
			}
			resps = append(resps, append(r, body...))
		}
		p.reqs, p.resps = append(p.reqs, reqs), append(p.resps, resps)
	}
	for range warm { // the tables and counters
		if err := p.round(); err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

// round relays one batch of depth requests and their responses on every
// session.
func (p *pairs) round() error {
	for c, s := range p.sess {
		for _, r := range p.reqs[c] {
			if err := s.Request(r, &p.up, true); err != nil {
				return err
			}
		}
		for i, r := range p.up {
			copy(p.resps[c][i][4:8], r[8:12]) // the broker answers kproxy's id
		}
		s.CountRequests()
		p.up.Reset()
		for _, r := range p.resps[c] {
			if err := s.Response(r, &p.out); err != nil {
				return err
			}
		}
		p.out.Reset()
		s.Written(true)
		s.EndSpans(true)
	}
	return nil
}

func benchClusterAB(b *testing.B, l relayLoad) {
	cfg := cluster.Config{NodePortBase: 9100, NodeIDs: cluster.NodeIDRange{Min: 0, Max: 99}}
	fronting := cluster.NewFronting(cfg, "127.0.0.1", cluster.NewTopology(cfg, zerolog.Nop()))
	single, clustered := newPairs(b, l, nil, 2), newPairs(b, l, fronting, 2)
	perRound := l.conns * l.depth
	// Blocks of rounds of about 4k pairs each: long beside a clock read,
	// short beside the machine's noisy moments.
	block := max(1, 4096/perRound)
	var tSingle, tCluster time.Duration
	var nSingle, nCluster int
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		for _, side := range []int{0, 1} { // single-broker first, then cluster mode
			p, t, n := single, &tSingle, &nSingle
			if side == 1 {
				p, t, n = clustered, &tCluster, &nCluster
			}
			start := time.Now()
			for range block {
				if err := p.round(); err != nil {
					b.Fatal(err)
				}
			}
			*t += time.Since(start)
			*n += block * perRound
			done += block * perRound
		}
	}
	b.StopTimer()
	single1 := float64(tSingle.Nanoseconds()) / float64(nSingle)
	cluster1 := float64(tCluster.Nanoseconds()) / float64(nCluster)
	b.ReportMetric(single1, "ns/pair-single")
	b.ReportMetric(cluster1, "ns/pair-cluster")
	b.ReportMetric(100*cluster1/single1, "cluster/single-%")
}

func produceReq(version int16) func() kmsg.Request {
	return func() kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Version, r.Acks, r.TimeoutMillis = version, 1, 5000
		t := kmsg.NewProduceRequestTopic()
		t.Topic = "kbench"
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = make([]byte, 62) // a batch's size, not its contents: never decoded
		t.Partitions = []kmsg.ProduceRequestTopicPartition{p}
		r.Topics = []kmsg.ProduceRequestTopic{t}
		return r
	}
}

func produceResp(version int16) func() kmsg.Response {
	return func() kmsg.Response {
		r := kmsg.NewPtrProduceResponse()
		r.Version = version
		t := kmsg.NewProduceResponseTopic()
		t.Topic = "kbench"
		t.Partitions = []kmsg.ProduceResponseTopicPartition{kmsg.NewProduceResponseTopicPartition()}
		r.Topics = []kmsg.ProduceResponseTopic{t}
		return r
	}
}

func fetchReq() kmsg.Request {
	r := kmsg.NewPtrFetchRequest()
	r.Version, r.MaxWaitMillis, r.MaxBytes = 16, 500, 1<<20
	t := kmsg.NewFetchRequestTopic()
	t.TopicID = [16]byte{1}
	t.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	r.Topics = []kmsg.FetchRequestTopic{t}
	return r
}

// fetchResp answers with 113 bytes of records, as kbench's null broker.
func fetchResp() kmsg.Response {
	r := kmsg.NewPtrFetchResponse()
	r.Version = 16
	t := kmsg.NewFetchResponseTopic()
	t.TopicID = [16]byte{1}
	p := kmsg.NewFetchResponseTopicPartition()
	p.RecordBatches = make([]byte, 113)
	t.Partitions = []kmsg.FetchResponseTopicPartition{p}
	r.Topics = []kmsg.FetchResponseTopic{t}
	return r
}

// The shapes of bench/run.sh's cluster section: Produce v10 and Fetch v16
// (walked in cluster mode), and Produce v9 as the control (only its
// version is checked), at 64 connections x 8 in flight and 1 x 64.
func BenchmarkRelayClusterAB(b *testing.B) {
	for _, s := range []struct {
		name string
		req  func() kmsg.Request
		resp func() kmsg.Response
	}{
		{"produce-v9", produceReq(9), produceResp(9)},
		{"produce-v10", produceReq(10), produceResp(10)},
		{"fetch-v16", fetchReq, fetchResp},
	} {
		for _, shape := range []struct {
			name         string
			conns, depth int
		}{{"64x8", 64, 8}, {"1x64", 1, 64}} {
			b.Run(s.name+"/"+shape.name, func(b *testing.B) {
				benchClusterAB(b, relayLoad{conns: shape.conns, depth: shape.depth, req: s.req, resp: s.resp})
			})
		}
	}
}

// TestRelayClusterABWalks checks that the benchmark measures what it
// says: its cluster-mode sessions pass Fetch v16 responses through the
// rewriter, which refuses one naming a broker outside node_ids, while the
// single-broker sessions relay it untouched.
func TestRelayClusterABWalks(t *testing.T) {
	cfg := cluster.Config{NodePortBase: 9100, NodeIDs: cluster.NodeIDRange{Min: 0, Max: 0}}
	fronting := cluster.NewFronting(cfg, "127.0.0.1", cluster.NewTopology(cfg, zerolog.Nop()))
	moved := func() kmsg.Response {
		r := fetchResp().(*kmsg.FetchResponse)
		br := kmsg.NewFetchResponseBroker()
		br.NodeID, br.Host, br.Port = 7, "broker-7", 9092 // outside node_ids
		r.Brokers = []kmsg.FetchResponseBroker{br}
		return r
	}
	l := relayLoad{conns: 2, depth: 4, req: fetchReq, resp: moved}
	if err := newPairs(t, l, nil, 1).round(); err != nil {
		t.Fatalf("single-broker sessions: %v", err)
	}
	var addrErr relay.AddressError
	if err := newPairs(t, l, fronting, 0).round(); !errors.As(err, &addrErr) {
		t.Fatalf("cluster-mode sessions relayed a response naming broker 7 (outside node_ids): got %v, want an AddressError", err)
	}
	l.resp = fetchResp
	if err := newPairs(t, l, fronting, 1).round(); err != nil {
		t.Fatalf("cluster-mode sessions, no NodeEndpoints: %v", err)
	}
}
