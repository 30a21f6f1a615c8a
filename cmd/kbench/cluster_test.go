package main

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/config"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy"
)

// testClusterKproxy runs kproxy in cluster mode in-process with upstream
// as its bootstrap and one node port, for node, whose address it returns.
func testClusterKproxy(t testing.TB, upstream string, node int32) string {
	t.Helper()
	if err := proxy.ConfigureNetpoll(); err != nil {
		t.Fatal(err)
	}
	nodeAddr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(nodeAddr)
	port, _ := strconv.Atoi(p)
	cfg := proxy.Defaults()
	cfg.Listen, cfg.Upstream, cfg.DrainTimeout, cfg.DialTimeout = "127.0.0.1:0", upstream, 2*time.Second, time.Second
	srv, err := proxy.New(cfg, framing.Defaults(), correlate.Defaults(), zerolog.Nop(),
		proxy.NewMetrics(prometheus.NewRegistry()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.SetCluster(cluster.Config{NodePortBase: port, NodeIDs: cluster.NodeIDRange{Min: node, Max: node}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		srv.Drain(ctx)
	})
	return nodeAddr
}

func nodeBroker(t testing.TB, node int32) *nullBroker {
	t.Helper()
	b, err := startBroker(brokerConfig{Listen: "127.0.0.1:0", Topic: "kbench", Partitions: 1, NodeID: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	return b
}

// TestLoadThroughClusterNodePort drives a cluster-mode kproxy's node port
// with the requests whose responses its rewriter walks (Produce v10+,
// Fetch v16+), and with ones it does not. The null broker (node 7) is
// learnt through the bootstrap, so the node port serves; every response
// is checked in order, and the first decoded.
func TestLoadThroughClusterNodePort(t *testing.T) {
	b := nodeBroker(t, 7)
	nodeAddr := testClusterKproxy(t, b.Addr(), 7)
	if err := askVersions(nodeAddr); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		api     string
		version int16
	}{{apiProduce, 9}, {apiProduce, 10}, {apiProduce, 13}, {apiFetch, 12}, {apiFetch, 16}, {apiFetch, 18}} {
		cfg := shortLoad(nodeAddr)
		cfg.Duration, cfg.API = 300*time.Millisecond, c.api
		if c.api == apiFetch {
			cfg.FetchVersion = c.version
		} else {
			cfg.ProduceVersion = c.version
		}
		res, err := runLoad(cfg)
		if err != nil {
			t.Fatalf("%s v%d: %v", c.api, c.version, err)
		}
		if res.Requests == 0 {
			t.Fatalf("%s v%d: no responses", c.api, c.version)
		}
		if c.api == apiFetch && res.RespBytes/res.Requests < int64(cfg.Size) {
			t.Fatalf("fetch v%d: %d bytes per response, want at least the %d bytes of records asked for", c.version, res.RespBytes/res.Requests, cfg.Size)
		}
		t.Logf("%s v%d: %d requests", c.api, c.version, res.Requests)
	}
}

// TestAskVersionsFailsOutsideNodeIDs: a null broker whose node id the
// cluster-mode kproxy does not serve leaves its node port unpaired, and
// compare's readiness check says so instead of measuring nothing.
func TestAskVersionsFailsOutsideNodeIDs(t *testing.T) {
	b := nodeBroker(t, 3)
	nodeAddr := testClusterKproxy(t, b.Addr(), 4)
	if err := askVersions(nodeAddr); err == nil {
		t.Fatal("node 4's port answered, but the only broker is node 3")
	}
}

// TestClusterConfigIsValid checks compare's cluster section against the
// config package, as kproxy will read it.
func TestClusterConfigIsValid(t *testing.T) {
	yaml := "proxy:\n  listen: 127.0.0.1:39093\n  upstream: 127.0.0.1:39092\n" + clusterConfig(39100, 5)
	f, root, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate("kproxy.yaml", root); err != nil {
		t.Fatal(err)
	}
	want := cluster.Config{NodePortBase: 39100, NodeIDs: cluster.NodeIDRange{Min: 5, Max: 5}}
	if !reflect.DeepEqual(f.Cluster, want) {
		t.Fatalf("cluster section %+v, want %+v", f.Cluster, want)
	}
}

// TestLoadFetchDirect: the null broker answers a Fetch load with the
// records it asked for, at every version the load sends.
func TestLoadFetchDirect(t *testing.T) {
	b := testBroker(t)
	for _, v := range []int16{4, 12, 16, 18} {
		cfg := shortLoad(b.Addr())
		cfg.Duration, cfg.API, cfg.FetchVersion, cfg.Size = 200*time.Millisecond, apiFetch, v, 5000
		res, err := runLoad(cfg)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if res.Requests == 0 || res.RespBytes/res.Requests < 5000 || res.mbPerSec() <= 0 {
			t.Fatalf("v%d: %d requests, %d bytes", v, res.Requests, res.RespBytes)
		}
		if want := float64(res.RespBytes) / res.Elapsed.Seconds() / 1e6; res.mbPerSec() != want {
			t.Fatalf("v%d: %.2f MB/s, want response bytes: %.2f", v, res.mbPerSec(), want)
		}
	}
}

// TestFetchedBatch: the records the null broker serves are a valid batch
// of about the size asked for, at the offset asked for.
func TestFetchedBatch(t *testing.T) {
	for _, c := range []struct {
		size   int
		offset int64
	}{{1000, 0}, {1000, 42}, {1 << 20, 7}, {2, 0}} {
		raw := fetchedBatch(c.size, c.offset)
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(raw); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if batch.FirstOffset != c.offset || batch.NumRecords != 1 || int(batch.Length) != len(raw)-12 {
			t.Fatalf("%+v: offset %d, %d records, length %d of %d", c, batch.FirstOffset, batch.NumRecords, batch.Length, len(raw))
		}
		if crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(batch.CRC) != crc {
			t.Fatalf("%+v: crc %x, want %x", c, uint32(batch.CRC), crc)
		}
		if c.size > 100 && (len(raw) < c.size-8 || len(raw) > c.size+8) {
			t.Fatalf("%+v: %d bytes", c, len(raw))
		}
	}
	// The shared batch at offset 0 is not changed by one at another offset.
	fetchedBatch(1000, 99)
	if got := binary.BigEndian.Uint64(fetchedBatch(1000, 0)); got != 0 {
		t.Fatalf("the shared batch moved to offset %d", got)
	}
}

// TestConsumerFetchStaysEmpty: a fetch asking for 1 byte, as the clients'
// consumers do, gets no records (kbench clients counts none).
func TestConsumerFetchStaysEmpty(t *testing.T) {
	b := testBroker(t)
	c := dialRaw(t, b.Addr())
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MinBytes, req.MaxWaitMillis = 16, 1, 100
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = topicID("kbench")
	ft.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	req.Topics = []kmsg.FetchRequestTopic{ft}
	resp := c.roundTrip(req).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("%+v", resp.Topics)
	}
}

func TestLoadVersionsValidated(t *testing.T) {
	for _, c := range []struct {
		cfg  func(*loadConfig)
		want string
	}{
		{func(c *loadConfig) { c.ProduceVersion = 2 }, "--produce-version 2"},
		{func(c *loadConfig) { c.ProduceVersion = 99 }, "--produce-version 99"},
		{func(c *loadConfig) { c.FetchVersion = 3 }, "--fetch-version 3"},
		{func(c *loadConfig) { c.API = "metadata" }, `--api "metadata"`},
	} {
		cfg := shortLoad("127.0.0.1:1")
		c.cfg(&cfg)
		if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.want, err)
		}
	}
}

func TestSpread(t *testing.T) {
	s, ok := spread([]float64{1.1, 0.9, 1.0, 1.3})
	if !ok || s.median != 1.05 || s.min != 0.9 || s.max != 1.3 {
		t.Fatalf("%+v", s)
	}
	if s, _ := spread([]float64{3, 1, 2}); s.median != 2 {
		t.Fatalf("%+v", s)
	}
	if _, ok := spread(nil); ok {
		t.Fatal("a spread of no rounds")
	}
}

// TestDiscoverNullBroker runs the discovery a cluster-mode kproxy does
// through its bootstrap (ApiVersions v0, Metadata for no topic) against
// the null broker: it must name itself, by its node id, at its address.
func TestDiscoverNullBroker(t *testing.T) {
	b := nodeBroker(t, 9)
	c, err := net.DialTimeout("tcp", b.Addr(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	brokers, err := cluster.Discover(c, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := cluster.Broker{NodeID: 9, Host: b.host, Port: b.port, EndpointType: cluster.EndpointBroker}
	if len(brokers) != 1 || brokers[0] != want {
		t.Fatalf("discovered %+v, want %+v", brokers, want)
	}
	// Partitions are led by that node too.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("kbench")}}
	resp := dialRaw(t, b.Addr()).roundTrip(md).(*kmsg.MetadataResponse)
	if p := resp.Topics[0].Partitions[0]; p.Leader != 9 || p.Replicas[0] != 9 || resp.ControllerID != 9 {
		t.Fatalf("leader %d, replicas %v, controller %d", p.Leader, p.Replicas, resp.ControllerID)
	}
}

// TestMedianCI checks the order statistics the interval takes: for 6
// ratios the extremes (a Binomial(6, 1/2) count is 0 with probability
// 1.6%, 0 or 1 with 10.9%), for 31 the 10th and 22nd, and none for 5.
func TestMedianCI(t *testing.T) {
	six := []float64{6, 1, 5, 2, 4, 3}
	if lo, hi, ok := medianCI(six); !ok || lo != 1 || hi != 6 {
		t.Fatalf("6 ratios: %v-%v %v, want 1-6", lo, hi, ok)
	}
	var r []float64
	for i := 31; i >= 1; i-- {
		r = append(r, float64(i))
	}
	if lo, hi, ok := medianCI(r); !ok || lo != 10 || hi != 22 {
		t.Fatalf("31 ratios: %v-%v %v, want 10-22", lo, hi, ok)
	}
	if _, _, ok := medianCI(six[:5]); ok {
		t.Fatal("an interval from 5 ratios")
	}
}
