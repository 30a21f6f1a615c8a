package cluster

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// addrCase builds a response of one version with addresses of nodes, and
// says which versions have the field: from..kmsg's max.
type addrCase struct {
	key   int16
	from  int16
	build func(v int16, nodes []int32) kmsg.Response
	// mapped is how many of nodes a rewrite must report (FindCoordinator
	// v0-3 answers only the first; -1 is skipped).
	mapped func(v int16, nodes []int32) int
}

func all(_ int16, nodes []int32) int { return len(nodes) }

var addrCases = []addrCase{
	{key: framing.KeyMetadata, from: 0, mapped: all, build: func(v int16, nodes []int32) kmsg.Response {
		r := kmsg.NewPtrMetadataResponse()
		r.Version = v
		for _, n := range nodes {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID = n
			b.Host, b.Port = realAddr(n)
			r.Brokers = append(r.Brokers, b)
		}
		return r
	}},
	{key: framing.KeyFindCoordinator, from: 0, build: func(v int16, nodes []int32) kmsg.Response {
		r := kmsg.NewPtrFindCoordinatorResponse()
		r.Version = v
		if v < 4 {
			r.NodeID = nodes[0]
			r.Host, r.Port = realAddr(nodes[0])
			return r
		}
		for _, n := range append(nodes, -1) {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = fmt.Sprint("group-", n)
			c.NodeID = n
			if n != -1 {
				c.Host, c.Port = realAddr(n)
			} else {
				c.ErrorCode = 15 // COORDINATOR_NOT_AVAILABLE
			}
			r.Coordinators = append(r.Coordinators, c)
		}
		return r
	}, mapped: func(v int16, nodes []int32) int {
		if v < 4 {
			return 1
		}
		return len(nodes)
	}},
	{key: framing.KeyDescribeCluster, from: 0, mapped: all, build: func(v int16, nodes []int32) kmsg.Response {
		r := kmsg.NewPtrDescribeClusterResponse()
		r.Version = v
		for _, n := range nodes {
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID = n
			b.Host, b.Port = realAddr(n)
			r.Brokers = append(r.Brokers, b)
		}
		return r
	}},
	{key: framing.KeyProduce, from: 10, mapped: all, build: func(v int16, nodes []int32) kmsg.Response {
		r := kmsg.NewPtrProduceResponse()
		r.Version = v
		t := kmsg.NewProduceResponseTopic()
		t.Topic = "t"
		t.TopicID = [16]byte{9}
		p := kmsg.NewProduceResponseTopicPartition()
		msg := "batch 1 rejected"
		p.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: 1, ErrorMessage: &msg}}
		p.ErrorMessage = &msg
		p.CurrentLeader.LeaderID = 1
		t.Partitions = []kmsg.ProduceResponseTopicPartition{p, kmsg.NewProduceResponseTopicPartition()}
		r.Topics = append(r.Topics, t)
		for _, n := range nodes {
			b := kmsg.NewProduceResponseBroker()
			b.NodeID = n
			b.Host, b.Port = realAddr(n)
			r.Brokers = append(r.Brokers, b)
		}
		return r
	}},
	{key: framing.KeyFetch, from: 16, mapped: all, build: func(v int16, nodes []int32) kmsg.Response {
		r := kmsg.NewPtrFetchResponse()
		r.Version = v
		r.Topics = fetchTopics(garbage(4096))
		for _, n := range nodes {
			b := kmsg.NewFetchResponseBroker()
			b.NodeID = n
			b.Host, b.Port = realAddr(n)
			r.Brokers = append(r.Brokers, b)
		}
		return r
	}},
	{key: framing.KeyShareFetch, from: 0, mapped: all, build: func(v int16, nodes []int32) kmsg.Response {
		r := kmsg.NewPtrShareFetchResponse()
		r.Version = v
		for _, n := range nodes {
			b := kmsg.NewShareFetchResponseNodeEndpoint()
			b.NodeID = n
			b.Host, b.Port = realAddr(n)
			r.NodeEndpoints = append(r.NodeEndpoints, b)
		}
		return r
	}},
	{key: framing.KeyShareAcknowledge, from: 0, mapped: all, build: func(v int16, nodes []int32) kmsg.Response {
		r := kmsg.NewPtrShareAcknowledgeResponse()
		r.Version = v
		for _, n := range nodes {
			b := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
			b.NodeID = n
			b.Host, b.Port = realAddr(n)
			r.NodeEndpoints = append(r.NodeEndpoints, b)
		}
		return r
	}},
}

// garbage is a records blob that is not a record batch at all: a walker
// that looked inside it would fail or change it.
func garbage(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 0xf3)
	}
	return b
}

// fetchTopics is one topic with two partitions, one carrying records.
func fetchTopics(records []byte) []kmsg.FetchResponseTopic {
	t := kmsg.NewFetchResponseTopic()
	t.Topic = "t"
	t.TopicID = [16]byte{1, 2, 3}
	p := kmsg.NewFetchResponseTopicPartition()
	p.RecordBatches = records
	p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 9}}
	q := kmsg.NewFetchResponseTopicPartition()
	q.Partition = 1
	q.CurrentLeader.LeaderID = 2
	t.Partitions = []kmsg.FetchResponseTopicPartition{p, q}
	return []kmsg.FetchResponseTopic{t}
}

// TestRewriteEveryVersion rewrites each address-bearing API at every
// version from the first with the field to kmsg's last, and checks what a
// client would decode: only mapped addresses, the same brokers reported,
// and every other field unchanged.
func TestRewriteEveryVersion(t *testing.T) {
	nodes := []int32{0, 1, 7}
	for _, c := range addrCases {
		max := kmsg.ResponseForKey(c.key).MaxVersion()
		for v := c.from; v <= max; v++ {
			t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(c.key), v), func(t *testing.T) {
				in := c.build(v, nodes)
				frame := frameOf(in)
				out, seen, err := Rewrite(frame, c.key, v, testMapper)
				if err != nil {
					t.Fatalf("Rewrite: %v", err)
				}
				if want := c.mapped(v, nodes); len(seen) != want {
					t.Fatalf("saw %d brokers, want %d: %+v", len(seen), want, seen)
				}
				for i, b := range seen {
					h, p := realAddr(nodes[i])
					if b.NodeID != nodes[i] || b.Host != h || b.Port != p || b.EndpointType != EndpointBroker {
						t.Fatalf("saw %+v, want node %d at %s:%d", b, nodes[i], h, p)
					}
				}
				got, err := decodeFrame(out, c.key, v)
				if err != nil {
					t.Fatalf("rewritten frame does not decode: %v", err)
				}
				addrs := addresses(got)
				if leaks(addrs) || len(addrs) != len(seen) {
					t.Fatalf("rewritten addresses %v", addrs)
				}
				for i, a := range addrs {
					if want := fmt.Sprintf("%s:%d", proxyHost, 9100+nodes[i]); a != want {
						t.Fatalf("address %d is %s, want %s", i, a, want)
					}
				}
				// Put the real addresses back: the rest must be identical.
				back, _, err := Rewrite(out, c.key, v, func(b Broker) (string, int32, bool) {
					h, p := realAddr(b.NodeID)
					return h, p, true
				})
				if err != nil {
					t.Fatalf("rewriting back: %v", err)
				}
				if !bytes.Equal(back, frame) {
					t.Fatalf("round trip changed the frame:\n%x\n%x", frame, back)
				}
				if !bytes.Equal(out[4:8], frame[4:8]) {
					t.Fatalf("correlation id changed")
				}
			})
		}
	}
}

// TestDescribeClusterControllers checks that controllers (endpoint type 2)
// reach the mapper as controllers, so they are not put on broker ports.
func TestDescribeClusterControllers(t *testing.T) {
	max := kmsg.NewPtrDescribeClusterResponse().MaxVersion()
	for v := int16(1); v <= max; v++ {
		r := addrCases[2].build(v, []int32{3, 4}).(*kmsg.DescribeClusterResponse)
		r.EndpointType = EndpointController
		out, seen, err := Rewrite(frameOf(r), framing.KeyDescribeCluster, v, testMapper)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		for _, b := range seen {
			if b.EndpointType != EndpointController {
				t.Fatalf("v%d: controller reported as %+v", v, b)
			}
		}
		got, err := decodeFrame(out, framing.KeyDescribeCluster, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range got.(*kmsg.DescribeClusterResponse).Brokers {
			if b.Host != ctrlHost || b.Port != 9500+b.NodeID {
				t.Fatalf("v%d: controller %d written as %s:%d", v, b.NodeID, b.Host, b.Port)
			}
		}
	}
}

// TestUnknownNodeFailsClosed: a node the mapper refuses is an error at
// every API, never a frame with its real address.
func TestUnknownNodeFailsClosed(t *testing.T) {
	for _, c := range addrCases {
		v := kmsg.ResponseForKey(c.key).MaxVersion()
		out, _, err := Rewrite(frameOf(c.build(v, []int32{5000})), c.key, v, testMapper)
		if err == nil || out != nil {
			t.Fatalf("%s: refused node gave %v, %x", kmsg.NameForKey(c.key), err, out)
		}
	}
}

// TestBeyondKmsgFailsClosed: a version kmsg does not know cannot be
// trusted to hold no address.
func TestBeyondKmsgFailsClosed(t *testing.T) {
	for _, c := range addrCases {
		v := kmsg.ResponseForKey(c.key).MaxVersion()
		frame := frameOf(c.build(v, []int32{1}))
		if _, _, err := Rewrite(frame, c.key, v+1, testMapper); err == nil {
			t.Fatalf("%s v%d: no error", kmsg.NameForKey(c.key), v+1)
		}
	}
}

// TestOtherAPIsUntouched: responses of APIs without broker addresses come
// back as the same slice.
func TestOtherAPIsUntouched(t *testing.T) {
	for _, key := range []int16{2, 8, 9, 11, 18, 19, 36, 68, 69} {
		r := kmsg.ResponseForKey(key)
		r.SetVersion(r.MaxVersion())
		frame := frameOf(r)
		out, seen, err := Rewrite(frame, key, r.MaxVersion(), testMapper)
		if err != nil || seen != nil || &out[0] != &frame[0] || len(out) != len(frame) {
			t.Fatalf("%s: %v %v", kmsg.NameForKey(key), err, seen)
		}
	}
}

// TestTaggedWithoutTagIsSameSlice: Produce and Fetch without NodeEndpoints
// at every version (also those before the tag existed) come back as the
// very same slice, records untouched.
func TestTaggedWithoutTagIsSameSlice(t *testing.T) {
	for _, key := range []int16{framing.KeyProduce, framing.KeyFetch} {
		c := addrCases[3]
		if key == framing.KeyFetch {
			c = addrCases[4]
		}
		r := kmsg.ResponseForKey(key)
		for v := int16(0); v <= r.MaxVersion(); v++ {
			frame := frameOf(c.build(v, nil))
			keep := bytes.Clone(frame)
			out, seen, err := Rewrite(frame, key, v, testMapper)
			if err != nil || seen != nil || &out[0] != &frame[0] || len(out) != len(frame) || !bytes.Equal(frame, keep) {
				t.Fatalf("%s v%d: err %v, seen %v", kmsg.NameForKey(key), v, err, seen)
			}
		}
	}
}

// TestTaggedKeepsOtherTagsAndRecords: with the tag present, garbage
// records and an unknown top-level tag after it pass through byte for byte.
func TestTaggedKeepsOtherTagsAndRecords(t *testing.T) {
	max := kmsg.NewPtrFetchResponse().MaxVersion()
	for v := int16(16); v <= max; v++ {
		r := addrCases[4].build(v, []int32{2}).(*kmsg.FetchResponse)
		r.UnknownTags.Set(5, []byte("later"))
		rack := "r1"
		r.Brokers[0].Rack = &rack
		out, _, err := Rewrite(frameOf(r), framing.KeyFetch, v, testMapper)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		got, err := decodeFrame(out, framing.KeyFetch, v)
		if err != nil {
			t.Fatal(err)
		}
		g := got.(*kmsg.FetchResponse)
		if !bytes.Equal(g.Topics[0].Partitions[0].RecordBatches, garbage(4096)) {
			t.Fatalf("v%d: records changed", v)
		}
		var tag5 []byte
		g.UnknownTags.Each(func(k uint32, b []byte) {
			if k == 5 {
				tag5 = b
			}
		})
		if !reflect.DeepEqual(tag5, []byte("later")) || *g.Brokers[0].Rack != "r1" {
			t.Fatalf("v%d: lost tag 5 or rack", v)
		}
	}
}

// TestEveryOtherResponseUntouched: every response kmsg can build, at every
// version, of an API that carries no broker address, comes back as the
// same slice; Carries agrees with Rewrite.
func TestEveryOtherResponseUntouched(t *testing.T) {
	for key := int16(0); key < 1000; key++ {
		r := kmsg.ResponseForKey(key)
		if r == nil || Carries(key) {
			continue
		}
		for v := int16(0); v <= r.MaxVersion(); v++ {
			r.SetVersion(v)
			frame := frameOf(r)
			out, seen, err := Rewrite(frame, key, v, testMapper)
			if err != nil || seen != nil || &out[0] != &frame[0] || len(out) != len(frame) {
				t.Fatalf("%s v%d: %v %v", kmsg.NameForKey(key), v, err, seen)
			}
		}
	}
}

// withHeaderTag inserts a tagged field into a flexible response header, as
// a future broker might send; the body must still be found.
func withHeaderTag(frame []byte) []byte {
	out := append([]byte(nil), frame[:8]...)
	out = append(out, 1, 3, 2, 0xab, 0xcd) // one tag: 3, two bytes
	out = append(out, frame[9:]...)
	return withSize(out)
}

// TestHeaderTagsSkipped: a flexible response header with a tagged field is
// skipped and kept, for the decoded and the walked APIs alike.
func TestHeaderTagsSkipped(t *testing.T) {
	for _, c := range addrCases {
		v := kmsg.ResponseForKey(c.key).MaxVersion()
		frame := withHeaderTag(frameOf(c.build(v, []int32{4})))
		out, seen, err := Rewrite(frame, c.key, v, testMapper)
		if err != nil || len(seen) != 1 {
			t.Fatalf("%s v%d: %v, saw %v", kmsg.NameForKey(c.key), v, err, seen)
		}
		if !bytes.Equal(out[8:13], frame[8:13]) {
			t.Fatalf("%s v%d: header tags changed", kmsg.NameForKey(c.key), v)
		}
		got, err := decodeFrame(out, c.key, v)
		if err != nil || leaks(addresses(got)) {
			t.Fatalf("%s v%d: %v %v", kmsg.NameForKey(c.key), v, err, addresses(got))
		}
	}
}

// TestDescribeClusterControllersRefused: controllers the mapper does not
// serve become UNSUPPORTED_ENDPOINT_TYPE with no address, not a failure.
func TestDescribeClusterControllersRefused(t *testing.T) {
	brokersOnly := func(b Broker) (string, int32, bool) {
		if b.EndpointType == EndpointController {
			return "", 0, false
		}
		return testMapper(b)
	}
	max := kmsg.NewPtrDescribeClusterResponse().MaxVersion()
	for v := int16(1); v <= max; v++ {
		r := addrCases[2].build(v, []int32{3, 4}).(*kmsg.DescribeClusterResponse)
		r.EndpointType = EndpointController
		out, seen, err := Rewrite(frameOf(r), framing.KeyDescribeCluster, v, brokersOnly)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if len(seen) != 0 {
			t.Fatalf("v%d: refused controllers reported as seen: %+v", v, seen)
		}
		got, err := decodeFrame(out, framing.KeyDescribeCluster, v)
		if err != nil {
			t.Fatal(err)
		}
		d := got.(*kmsg.DescribeClusterResponse)
		if d.ErrorCode != 115 || len(d.Brokers) != 0 || d.ErrorMessage == nil {
			t.Fatalf("v%d: got error %d, %d brokers", v, d.ErrorCode, len(d.Brokers))
		}
	}
}
