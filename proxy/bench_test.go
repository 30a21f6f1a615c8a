package proxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/tracing"
)

// The relay benchmarks drive kproxy with a client and an upstream that
// allocate nothing themselves, so allocs/op is kproxy's own cost per
// request/response pair.

// nullUpstream answers every request with a fixed-size v0 response carrying
// the request's correlation id, allocating nothing per request.
func nullUpstream(b *testing.B, respSize int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				in := make([]byte, 1<<20)
				out := make([]byte, 4+respSize)
				binary.BigEndian.PutUint32(out, uint32(respSize))
				for {
					if _, err := io.ReadFull(c, in[:4]); err != nil {
						return
					}
					n := int(binary.BigEndian.Uint32(in))
					if _, err := io.ReadFull(c, in[4:4+n]); err != nil {
						return
					}
					copy(out[4:8], in[8:12])
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}(c)
		}
	}()
	return ln.Addr().String()
}

// produceLike is a Produce v7 request header with acks=-1 and size bytes of
// body in all, the common shape of a frame kproxy relays.
func produceLike(size int) []byte {
	f := make([]byte, 4+size)
	binary.BigEndian.PutUint32(f, uint32(size))
	binary.BigEndian.PutUint16(f[4:], 0)  // Produce
	binary.BigEndian.PutUint16(f[6:], 7)  // v7
	binary.BigEndian.PutUint16(f[12:], 4) // client id "bench"
	copy(f[14:], "bench")
	binary.BigEndian.PutUint16(f[18:], 0xffff) // null transactional id
	binary.BigEndian.PutUint16(f[20:], 0xffff) // acks -1
	return f
}

func benchRelay(b *testing.B, reqSize, respSize, window int, opts ...envOpt) {
	benchRelayWith(b, nil, nil, reqSize, respSize, window, opts...)
}

// benchRelayWith runs the relay benchmark with a tracer and rules.
func benchRelayWith(b *testing.B, tr *tracing.Tracer, rules *policy.Engine, reqSize, respSize, window int, opts ...envOpt) {
	benchRelayFrames(b, tr, rules, produceLike(reqSize), respSize, window, opts...)
}

// benchRelayFrames runs the relay benchmark with req as every request
// (its correlation id set for each).
func benchRelayFrames(b *testing.B, tr *tracing.Tracer, rules *policy.Engine, req []byte, respSize, window int, opts ...envOpt) {
	opts = append(opts, func(_ *Config, _ *framing.Config, cc *correlate.Config) {
		cc.MaxInFlight = max(window, 1)
	})
	var c net.Conn
	if tr == tlsBench {
		// TLS from the client: the stream driver relays.
		w := startTLSProxy(b, nullUpstream(b, respSize), false, opts...)
		w.srv.SetPolicies(rules)
		tc, err := tls.Dial("tcp", w.addr, w.clientTLS(b, tlsSides{client: true}, ""))
		if err != nil {
			b.Fatal(err)
		}
		c = tc
	} else {
		env := startTracedProxy(b, nullUpstream(b, respSize), tr, opts...)
		env.srv.SetPolicies(rules)
		var err error
		if c, err = net.Dial("tcp", env.addr); err != nil {
			b.Fatal(err)
		}
	}
	defer c.Close()
	resp := make([]byte, 4+respSize)
	roundTrip := func(id int32) {
		binary.BigEndian.PutUint32(req[8:], uint32(id))
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
	}
	read := func(want int32) {
		if _, err := io.ReadFull(c, resp); err != nil {
			b.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(resp[4:])); got != want {
			b.Fatalf("response id %d, want %d", got, want)
		}
	}
	for i := 0; i < 1000; i++ { // warm pools and buffers
		roundTrip(int32(i))
		read(int32(i))
	}
	b.SetBytes(int64(len(req) + len(resp)))
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for i := 0; i < b.N; i++ {
		for sent < b.N && sent-i < window {
			roundTrip(int32(sent))
			sent++
		}
		read(int32(i))
	}
}

// One request and its response through kproxy, one at a time.
func BenchmarkRelayRoundTrip(b *testing.B) { benchRelay(b, 100, 100, 1) }

// 64 requests in flight on one connection: the pipelined throughput.
func BenchmarkRelayPipelined(b *testing.B) { benchRelay(b, 100, 100, 64) }

// The same with a linger: a relay goroutine waits for the next frame, so
// netpoll dispatches (and allocates a task) only when a connection goes
// quiet, where the default relays each batch on the poller.
func BenchmarkRelayRoundTripLinger(b *testing.B) { benchRelay(b, 100, 100, 1, withLinger) }

func BenchmarkRelayPipelinedLinger(b *testing.B) { benchRelay(b, 100, 100, 64, withLinger) }

func withLinger(c *Config, _ *framing.Config, _ *correlate.Config) { c.Linger = 5 * time.Millisecond }

// 16 KiB requests, large enough that netpoll references them instead of
// copying.
func BenchmarkRelayLargeFrames(b *testing.B) { benchRelay(b, 16<<10, 100, 8) }

// The cost of tracing on the pipelined relay: off, sampling 1 in 100, and
// every request (spans built and handed to a discarding exporter); and
// with propagation.inject on, which relays every Produce off the poller
// (ratio0 says what that alone costs an unsampled request).
func BenchmarkRelayTracing(b *testing.B) {
	for _, tc := range []struct {
		name   string
		ratio  float64
		inject bool
	}{{"off", -1, false}, {"ratio0.01", 0.01, false}, {"ratio1", 1, false}, {"inject/ratio0", 0, true}, {"inject/ratio0.01", 0.01, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var tr *tracing.Tracer
			if tc.ratio >= 0 {
				c := tracing.Defaults()
				c.SampleRatio = &tc.ratio
				c.Propagation.Inject = tc.inject
				var err error
				if tr, err = tracing.NewWithExporter(c, "bench", tracetest.NewNoopExporter(), prometheus.NewRegistry()); err != nil {
					b.Fatal(err)
				}
				defer tr.Shutdown(context.Background())
			}
			benchRelayWith(b, tr, nil, 100, 100, 64)
		})
	}
}

// tlsBench marks benchRelayWith's tracer argument for a TLS client, to
// run the stream driver instead of netpoll.
var tlsBench = new(tracing.Tracer)

// The stream driver (TLS from the client, plaintext upstream): one
// request at a time and 64 in flight. Its allocs/op include the test
// client's TLS.
func BenchmarkRelayTLS(b *testing.B) {
	b.Run("roundtrip", func(b *testing.B) { benchRelayWith(b, tlsBench, nil, 100, 100, 1) })
	b.Run("pipelined", func(b *testing.B) { benchRelayWith(b, tlsBench, nil, 100, 100, 64) })
	b.Run("large", func(b *testing.B) { benchRelayWith(b, tlsBench, nil, 16<<10, 100, 8) })
}

// Header-only rules on the relay: an access rule that does not match and a
// rate rule that never fires, checked for every request.
func BenchmarkRelayPolicies(b *testing.B) {
	rules := policy.New(policy.Config{Rules: []policy.Rule{
		{Name: "no-deletes", Match: policy.Selector{ClientID: "app-*", APIs: []string{"DeleteTopics"}}, Action: policy.ActionReject},
		{Name: "rate", Match: policy.Selector{APIs: []string{"Produce"}}, Limits: policy.Limits{RequestsPerSecond: 1e9}, Action: policy.ActionThrottle},
	}}, policy.NewMetrics(prometheus.NewRegistry()))
	benchRelayWith(b, nil, rules, 100, 100, 64)
}

// Governance rules on the relay: an admin-only rule that never selects a
// Produce, and an acks rule every Produce is judged by from the frame's
// acks (the body is decoded only to refuse).
func BenchmarkRelayGovernance(b *testing.B) {
	rules := policy.New(policy.Config{Rules: []policy.Rule{
		{Name: "topics", Match: policy.Selector{APIs: []string{"CreateTopics"}}, Action: policy.ActionReject,
			Require: &policy.Require{Partitions: &policy.Range{Min: i64(3)}}},
		{Name: "acks", Match: policy.Selector{APIs: []string{"Produce"}}, Action: policy.ActionReject,
			Require: &policy.Require{Acks: "1"}},
	}}, policy.NewMetrics(prometheus.NewRegistry()))
	benchRelayWith(b, nil, rules, 100, 100, 64)
}

// fetchLike is a Fetch v12 request for one partition with no rack_id,
// as a consumer that sets no rack sends it.
func fetchLike() []byte {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, -1, 500, 1, 1<<20
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "orders"
	p := kmsg.NewFetchRequestTopicPartition()
	p.FetchOffset, p.PartitionMaxBytes = 42, 1<<20
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, req, 0)
}

// Fetch requests relayed as they are, and with proxy.client_rack filled
// into each (the frame spliced around rack_id, not copied).
func BenchmarkRelayFetch(b *testing.B) { benchRelayFrames(b, nil, nil, fetchLike(), 100, 64) }
func BenchmarkRelayFetchRack(b *testing.B) {
	benchRelayFrames(b, nil, nil, fetchLike(), 100, 64, withClientRack("europe-west1-b"))
}
