package main

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// testBroker starts a null broker on a free loopback port for one test.
func testBroker(t testing.TB) *nullBroker {
	t.Helper()
	b, err := startBroker(brokerConfig{Listen: "127.0.0.1:0", Topic: "kbench", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	return b
}

// rawClient speaks frames to a broker: write a request, read a response.
type rawClient struct {
	t    testing.TB
	c    net.Conn
	r    *bufio.Reader
	corr int32
	buf  []byte
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes req at its set version and returns its correlation id.
func (rc *rawClient) send(req kmsg.Request) int32 {
	rc.t.Helper()
	rc.corr++
	if _, err := rc.c.Write(requestFrame(req, rc.corr, "kbench-test")); err != nil {
		rc.t.Fatal(err)
	}
	return rc.corr
}

// recv reads one response to a request of key/version, checks its
// correlation id, and decodes it with kmsg at that version.
func (rc *rawClient) recv(key, version int16, corr int32) kmsg.Response {
	rc.t.Helper()
	frame, err := readFrame(rc.r, &rc.buf)
	if err != nil {
		rc.t.Fatalf("%s v%d: %v", kmsg.NameForKey(key), version, err)
	}
	h, err := framing.ParseResponseHeader(frame, key, version)
	if err != nil {
		rc.t.Fatal(err)
	}
	if h.CorrelationID != corr {
		rc.t.Fatalf("%s v%d: correlation id %d, want %d", kmsg.NameForKey(key), version, h.CorrelationID, corr)
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if err := resp.ReadFrom(frame[h.BodyOffset:]); err != nil {
		rc.t.Fatalf("%s v%d: decoding response: %v", kmsg.NameForKey(key), version, err)
	}
	return resp
}

func (rc *rawClient) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	return rc.recv(req.Key(), req.GetVersion(), rc.send(req))
}

func TestBrokerApiVersions(t *testing.T) {
	rc := dialRaw(t, testBroker(t).Addr())
	for _, v := range []int16{0, 1, 2, 3, 4} { // v3+ is flexible
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "kbench", "test"
		resp := rc.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(answered) {
			t.Fatalf("v%d: error %d, %d keys", v, resp.ErrorCode, len(resp.ApiKeys))
		}
		for _, k := range resp.ApiKeys {
			if k.MaxVersion != framing.MaxVersion(k.ApiKey) {
				t.Errorf("v%d: %s max %d, want %d", v, kmsg.NameForKey(k.ApiKey), k.MaxVersion, framing.MaxVersion(k.ApiKey))
			}
		}
	}
	// A version newer than kmsg knows gets a v0 answer with UNSUPPORTED_VERSION,
	// as Kafka does, so the client can retry.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 4
	frame := requestFrame(req, 77, "x")
	frame[6], frame[7] = 0, 99 // a version from the future
	if _, err := rc.c.Write(frame); err != nil {
		t.Fatal(err)
	}
	resp := rc.recv(18, 0, 77).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != errUnsupportedVersion || len(resp.ApiKeys) == 0 {
		t.Fatalf("unknown version: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

func TestBrokerMetadata(t *testing.T) {
	b := testBroker(t)
	rc := dialRaw(t, b.Addr())
	host, port, _ := splitHostPort(b.Addr())
	for _, v := range []int16{0, 1, 4, 8, 9, 10, 12, 13} { // v9+ is flexible
		// All topics: the configured one.
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{} // v0: empty means all
		}
		resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].Host != host || resp.Brokers[0].Port != port {
			t.Fatalf("v%d: brokers %+v, want %s:%d", v, resp.Brokers, host, port)
		}
		if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "kbench" || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("v%d: topics %+v", v, resp.Topics)
		}
		// Any topic asked for exists, with every partition led by the broker.
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("orders")}, {Topic: kmsg.StringPtr("audit")}}
		resp = rc.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 2 || *resp.Topics[1].Topic != "audit" {
			t.Fatalf("v%d: topics %+v", v, resp.Topics)
		}
		for _, tp := range resp.Topics {
			if tp.ErrorCode != 0 || len(tp.Partitions) != 3 || tp.Partitions[2].Leader != 0 {
				t.Fatalf("v%d: topic %+v", v, tp)
			}
			if v >= 10 && tp.TopicID != topicID(*tp.Topic) {
				t.Fatalf("v%d: topic id %x", v, tp.TopicID)
			}
		}
	}
	// By id (v10+), for a topic the broker has named.
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{{TopicID: topicID("orders")}, {TopicID: [16]byte{1}}}
	resp := rc.roundTrip(req).(*kmsg.MetadataResponse)
	if *resp.Topics[0].Topic != "orders" || resp.Topics[1].ErrorCode != 100 {
		t.Fatalf("by id: %+v", resp.Topics)
	}
}

func TestBrokerProduce(t *testing.T) {
	rc := dialRaw(t, testBroker(t).Addr())
	batch := produceRecords(t)
	for _, v := range []int16{3, 5, 7, 8, 9, 11, 12, 13} { // v9+ is flexible, v13 names topics by id
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = v, -1, 1000
		tp := kmsg.ProduceRequestTopic{Topic: "orders", TopicID: topicID("orders")}
		for p := range int32(3) {
			tp.Partitions = append(tp.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: batch})
		}
		req.Topics = []kmsg.ProduceRequestTopic{tp}
		resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("v%d: %+v", v, resp.Topics)
		}
		rt := resp.Topics[0]
		if (v < 13 && rt.Topic != "orders") || (v >= 13 && rt.TopicID != topicID("orders")) {
			t.Fatalf("v%d: topic %q id %x", v, rt.Topic, rt.TopicID)
		}
		for i, p := range rt.Partitions {
			if p.ErrorCode != 0 || p.Partition != int32(i) || p.BaseOffset < 0 {
				t.Fatalf("v%d: partition %+v", v, p)
			}
		}
	}
	// acks=0 has no response: the next response answers the next request.
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 9, 0
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch}}}}
	rc.send(req)
	rc.roundTrip(kmsg.NewPtrApiVersionsRequest())
}

func TestBrokerFetch(t *testing.T) {
	rc := dialRaw(t, testBroker(t).Addr())
	for _, v := range []int16{0, 4, 7, 11, 12, 13, 16, 18} { // v12+ is flexible, v13+ by topic id
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MinBytes = v, 5000, 1 // asks to wait; answered at once anyway
		req.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", TopicID: topicID("orders"),
			Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0}, {Partition: 2, FetchOffset: 10}}}}
		start := time.Now()
		resp := rc.roundTrip(req).(*kmsg.FetchResponse)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("v%d: waited %v", v, d)
		}
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		rt := resp.Topics[0]
		if (v < 13 && rt.Topic != "orders") || (v >= 13 && rt.TopicID != topicID("orders")) {
			t.Fatalf("v%d: topic %q id %x", v, rt.Topic, rt.TopicID)
		}
		if p := rt.Partitions[1]; p.Partition != 2 || p.ErrorCode != 0 || len(p.RecordBatches) != 0 {
			t.Fatalf("v%d: partition %+v", v, p)
		}
	}
}

func TestBrokerClosesOnUnknownAPI(t *testing.T) {
	rc := dialRaw(t, testBroker(t).Addr())
	req := kmsg.NewPtrDeleteTopicsRequest() // not a null-broker API
	rc.send(req)
	if _, err := readFrame(rc.r, &rc.buf); err == nil {
		t.Fatal("got a response to DeleteTopics")
	}
}

// produceRecords is one valid record batch, as the load generator sends.
func produceRecords(t testing.TB) []byte {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version = produceVersion
	frame := produceFrame("orders", 300, "")
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if err := req.ReadFrom(frame[h.BodyOffset:]); err != nil {
		t.Fatal(err)
	}
	return req.Topics[0].Partitions[0].Records
}

// TestBrokerFranzProduce is a real client against the null broker: franz-go
// (idempotent by default) produces 1,000 records and every one is acked.
func TestBrokerFranzProduce(t *testing.T) {
	b := testBroker(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, 1000)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte{byte(i)}, Value: []byte("value")}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	seen := map[[2]int64]bool{}
	for _, r := range recs {
		k := [2]int64{int64(r.Partition), r.Offset}
		if seen[k] {
			t.Fatalf("offset %d of partition %d acked twice", r.Offset, r.Partition)
		}
		seen[k] = true
	}
}
