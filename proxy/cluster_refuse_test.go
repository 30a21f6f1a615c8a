package proxy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// expectNothing fails unless kproxy closes c without writing a byte.
func expectNothing(t testing.TB, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if len(got) > 0 {
		t.Fatalf("%s: the client received %d bytes (%x), want none", what, len(got), got)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: connection still open after 30s", what)
	}
}

// answered fails unless an ApiVersions on c gets its answer: the
// connection is alive and relayed.
func answered(t testing.TB, c net.Conn, corr int32) {
	t.Helper()
	if _, err := c.Write(apiVersionsV0(corr)); err != nil {
		t.Fatalf("ApiVersions %d: %v", corr, err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	f, err := readFrame(c)
	if err != nil || corrOf(f) != corr {
		t.Fatalf("ApiVersions %d not answered: %v", corr, err)
	}
}

// TestClusterNodeOutsideRange: kfake has brokers 0-2 and kproxy serves
// node ids 0-1. A response naming node 2 (Metadata, FindCoordinator,
// Produce NodeEndpoints) is not passed on: its pair is closed with a log
// line naming node 2, the client receives nothing of it, and another
// client's connection carries on.
func TestClusterNodeOutsideRange(t *testing.T) {
	const topic = "outside"
	env := startCluster(t, 3, 1, []kfake.Opt{kfake.SeedTopics(1, topic)})
	if err := env.kc.MoveTopicPartition(topic, 0, 1); err != nil {
		t.Fatal(err)
	}
	bystander := dialRaw(t, env.addr)
	answered(t, bystander, 1)

	group := ""
	for i := 0; group == ""; i++ {
		if g := fmt.Sprintf("group-%d", i); env.kc.CoordinatorFor(g) == 2 {
			group = g
		}
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorKeys = 4, []string{group}
	// Partition 0 is led by node 1: node 0 answers NOT_LEADER with the
	// endpoints of all three brokers.
	produce := produceRequest(11, -1, topic)
	cases := []struct {
		name string
		addr string
		req  kmsg.Request
	}{
		{"Metadata", env.addr, md},
		{"FindCoordinator", env.addr, fc},
		{"Produce NodeEndpoints", env.nodeAddr(0), produce},
	}
	for i, tc := range cases {
		c := dialRaw(t, tc.addr)
		if _, err := c.Write(encodeRequest(tc.req, int32(10+i))); err != nil {
			t.Fatal(err)
		}
		expectNothing(t, c, tc.name+" naming node 2")
		want := float64(i + 1)
		waitFor(t, 10*time.Second, "the close to be counted", func() bool {
			return testutil.ToFloat64(env.m.ProtocolErrs.WithLabelValues("unmapped_broker")) >= want
		})
	}
	if got := testutil.ToFloat64(env.m.ProtocolErrs.WithLabelValues("unmapped_broker")); got != float64(len(cases)) {
		t.Fatalf("kproxy_protocol_errors_total{kind=unmapped_broker} = %v, want %d", got, len(cases))
	}
	waitFor(t, 10*time.Second, "a log line naming node 2", func() bool {
		return env.logs.contains("node 2 (") && env.logs.contains("upstream named a broker kproxy cannot front")
	})
	answered(t, bystander, 2)
}

// controllersBroker is a scripted one-broker cluster at its own address
// whose DescribeCluster, asked for controllers (endpoint type 2), lists
// controllers at hosts a client must never see, with node ids that kproxy
// serves as brokers.
func controllersBroker(t testing.TB) *fakeUpstream {
	t.Helper()
	var self atomic.Value
	u := scriptedBroker(t, func(req kmsg.Request) kmsg.Response {
		switch r := req.(type) {
		case *kmsg.MetadataRequest:
			return metadataAnswer(t, map[int32]string{0: self.Load().(string)})
		case *kmsg.DescribeClusterRequest:
			resp := kmsg.NewPtrDescribeClusterResponse()
			resp.ClusterID, resp.ControllerID = "scripted", 0
			if r.Version >= 1 && r.EndpointType == 2 {
				resp.EndpointType = 2
				for n := int32(0); n < 2; n++ {
					b := kmsg.NewDescribeClusterResponseBroker()
					b.NodeID, b.Host, b.Port = n, fmt.Sprintf("controller-%d.internal", n), 9093
					resp.Brokers = append(resp.Brokers, b)
				}
				return resp
			}
			host, port, _ := net.SplitHostPort(self.Load().(string))
			b := kmsg.NewDescribeClusterResponseBroker()
			b.NodeID, b.Host = 0, host
			fmt.Sscan(port, &b.Port)
			resp.Brokers = append(resp.Brokers, b)
			return resp
		}
		return nil
	})
	self.Store(u.addr())
	return u
}

// TestClusterDescribeClusterControllers: a DescribeCluster asking for the
// controllers is answered UNSUPPORTED_ENDPOINT_TYPE with no address, on a
// connection that stays open; asking for brokers gets them at their node
// ports.
func TestClusterDescribeClusterControllers(t *testing.T) {
	up := controllersBroker(t)
	env := startClusterProxy(t, up.addr(), 3, nil, nil)
	c := dialRaw(t, env.addr)
	for v := int16(1); v <= kmsg.NewPtrDescribeClusterRequest().MaxVersion(); v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version, req.EndpointType = v, 2
		frame, resp := clusterRoundTrip(t, c, req, int32(v))
		r := resp.(*kmsg.DescribeClusterResponse)
		if r.ErrorCode != kerr.UnsupportedEndpointType.Code {
			t.Fatalf("DescribeCluster v%d for controllers: error %v, want UNSUPPORTED_ENDPOINT_TYPE", v, kerr.ErrorForCode(r.ErrorCode))
		}
		if len(r.Brokers) != 0 || bytes.Contains(frame, []byte("controller-")) {
			t.Fatalf("DescribeCluster v%d for controllers: the client got controller endpoints %v", v, r.Brokers)
		}
	}
	for v := int16(0); v <= kmsg.NewPtrDescribeClusterRequest().MaxVersion(); v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		_, resp := clusterRoundTrip(t, c, req, 10+int32(v))
		r := resp.(*kmsg.DescribeClusterResponse)
		if r.ErrorCode != 0 || len(r.Brokers) != 1 {
			t.Fatalf("DescribeCluster v%d for brokers: error %v, %d brokers", v, kerr.ErrorForCode(r.ErrorCode), len(r.Brokers))
		}
		if got := hostPort(r.Brokers[0].Host, r.Brokers[0].Port); got != env.nodeAddr(0) {
			t.Fatalf("DescribeCluster v%d: broker 0 at %s, want its node port %s", v, got, env.nodeAddr(0))
		}
	}
}

// TestClusterGarbledMetadata: a Metadata response that cannot be parsed
// may hold broker addresses, so it is not passed on: its pair is closed
// with a log line and the client receives nothing, while kproxy's own
// discovery and other clients carry on.
func TestClusterGarbledMetadata(t *testing.T) {
	var self atomic.Value
	up := startFakeUpstream(t, func(c net.Conn, frame []byte) {
		req, corr, err := parseRequest(frame)
		if err != nil {
			c.Close()
			return
		}
		var resp kmsg.Response
		switch req.(type) {
		case *kmsg.ApiVersionsRequest:
			av := kmsg.NewPtrApiVersionsResponse()
			for _, k := range []int16{3, 18} {
				v := kmsg.NewApiVersionsResponseApiKey()
				v.ApiKey, v.MaxVersion = k, kmsg.ResponseForKey(k).MaxVersion()
				av.ApiKeys = append(av.ApiKeys, v)
			}
			resp = av
		case *kmsg.MetadataRequest:
			resp = metadataAnswer(t, map[int32]string{0: self.Load().(string)})
		default:
			c.Close()
			return
		}
		resp.SetVersion(req.GetVersion())
		out := responseFrame(resp, corr)
		_, isMetadata := req.(*kmsg.MetadataRequest)
		if n := int(binary.BigEndian.Uint16(frame[12:])); isMetadata && string(frame[14:14+n]) == "raw-test" {
			// the client's, not kproxy's discovery: cut short
			out = out[:len(out)-30]
			binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		}
		c.Write(out)
	})
	self.Store(up.addr())
	env := startClusterProxy(t, up.addr(), 3, nil, nil)
	bystander := dialRaw(t, env.addr)
	answered(t, bystander, 1)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	c := dialRaw(t, env.addr)
	if _, err := c.Write(encodeRequest(md, 7)); err != nil {
		t.Fatal(err)
	}
	expectNothing(t, c, "a garbled Metadata")
	waitFor(t, 10*time.Second, "the close counted and logged", func() bool {
		return testutil.ToFloat64(env.m.ProtocolErrs.WithLabelValues("unmapped_broker")) == 1 &&
			env.logs.contains("upstream sent a response that may name brokers and kproxy cannot read")
	})
	answered(t, bystander, 2)
	if got := env.realAddr(t, 0); got != up.addr() {
		t.Fatalf("node 0 learnt at %s, want %s", got, up.addr())
	}
}
