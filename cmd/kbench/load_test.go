package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy"
)

// testKproxy runs kproxy in-process in front of upstream, as
// proxy/harness_test.go does, and drains it at the end of the test.
func testKproxy(t testing.TB, upstream string) string {
	t.Helper()
	return testKproxyServer(t, upstream).Addr().String()
}

// testKproxyServer is testKproxy's server, for tests that set policies.
func testKproxyServer(t testing.TB, upstream string) *proxy.Server {
	t.Helper()
	if err := proxy.ConfigureNetpoll(); err != nil {
		t.Fatal(err)
	}
	cfg := proxy.Defaults()
	cfg.Listen, cfg.Upstream, cfg.DrainTimeout = "127.0.0.1:0", upstream, 2*time.Second
	srv, err := proxy.New(cfg, framing.Defaults(), correlate.Defaults(), zerolog.Nop(),
		proxy.NewMetrics(prometheus.NewRegistry()), nil)
	if err != nil {
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
	return srv
}

func shortLoad(addr string) loadConfig {
	return loadConfig{Addr: addr, Conns: 2, Depth: 4, Size: 200, Duration: time.Second,
		MaxRequests: 2_000_000, Topic: "kbench"}
}

func checkLoad(t *testing.T, res loadResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.reqPerSec() <= 0 || res.mbPerSec() <= 0 || res.Hist.total != uint64(res.Requests) {
		t.Fatalf("requests %d, %.0f req/s, %.2f MB/s, %d latencies", res.Requests, res.reqPerSec(), res.mbPerSec(), res.Hist.total)
	}
	if res.FrameLen != 200 {
		t.Errorf("frame %d bytes, want 200", res.FrameLen)
	}
	if p50 := res.Hist.quantile(0.5); p50 <= 0 || p50 > res.Hist.quantile(0.99) {
		t.Errorf("p50 %v, p99 %v", p50, res.Hist.quantile(0.99))
	}
	t.Logf("%d requests, %.0f req/s, p50 %v, p99 %v", res.Requests, res.reqPerSec(), res.Hist.quantile(0.5), res.Hist.quantile(0.99))
}

// TestLoadDirect drives the null broker for about a second. Every response
// is checked to carry the next correlation id in order, so a nil error
// means they all did.
func TestLoadDirect(t *testing.T) {
	res, err := runLoad(shortLoad(testBroker(t).Addr()))
	checkLoad(t, res, err)
}

func TestLoadThroughKproxy(t *testing.T) {
	b := testBroker(t)
	res, err := runLoad(shortLoad(testKproxy(t, b.Addr())))
	checkLoad(t, res, err)
}

func TestLoadStopsAtMaxRequests(t *testing.T) {
	cfg := shortLoad(testBroker(t).Addr())
	cfg.MaxRequests, cfg.Duration = 100, time.Minute
	start := time.Now()
	res, err := runLoad(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 100 || time.Since(start) > 10*time.Second {
		t.Fatalf("%d requests in %v, want 100 at once", res.Requests, time.Since(start))
	}
}

// TestLoadDetectsReordering runs the load against a server that answers
// the second request before the first.
func TestLoadDetectsReordering(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		var buf []byte
		var corrs []int32
		for len(corrs) < 2 {
			frame, err := readFrame(r, &buf)
			if err != nil {
				return
			}
			h, _ := framing.ParseRequestHeader(frame)
			corrs = append(corrs, h.CorrelationID)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = produceVersion
		var out []byte
		out = appendResponse(out, 0, produceVersion, corrs[1], resp)
		out = appendResponse(out, 0, produceVersion, corrs[0], resp)
		c.Write(out)
		time.Sleep(time.Second)
	}()
	cfg := shortLoad(ln.Addr().String())
	cfg.Conns, cfg.Depth = 1, 2
	_, err = runLoad(cfg)
	if err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("err = %v, want out of order", err)
	}
}

func TestLoadFailsOnProduceError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var buf []byte
		frame, err := readFrame(bufio.NewReader(c), &buf)
		if err != nil {
			return
		}
		h, _ := framing.ParseRequestHeader(frame)
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = produceVersion
		resp.Topics = []kmsg.ProduceResponseTopic{{Topic: "kbench", Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: 3}}}}
		c.Write(appendResponse(nil, 0, produceVersion, h.CorrelationID, resp))
		time.Sleep(time.Second)
	}()
	cfg := shortLoad(ln.Addr().String())
	cfg.Conns, cfg.Depth = 1, 1
	if _, err := runLoad(cfg); err == nil || !strings.Contains(err.Error(), "error code 3") {
		t.Fatalf("err = %v, want the produce error", err)
	}
}

// TestProduceFrame checks the prebuilt frame: the size asked for, a header
// framing parses, a body kmsg decodes, and a record batch with a valid CRC.
func TestProduceFrame(t *testing.T) {
	for _, size := range []int{150, 200, 1000, 4097, 1 << 20} {
		frame := produceFrame("kbench", size, "kbench")
		if len(frame) != size || int(binary.BigEndian.Uint32(frame)) != size-4 {
			t.Fatalf("size %d: frame %d bytes, prefix %d", size, len(frame), binary.BigEndian.Uint32(frame))
		}
		h, err := framing.ParseRequestHeader(frame)
		if err != nil || h.APIKey != 0 || h.APIVersion != produceVersion || h.HeaderVersion != 2 {
			t.Fatalf("size %d: header %+v, %v", size, h, err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version = produceVersion
		if err := req.ReadFrom(frame[h.BodyOffset:]); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if req.Acks != 1 || req.Topics[0].Topic != "kbench" {
			t.Fatalf("size %d: acks %d topic %q", size, req.Acks, req.Topics[0].Topic)
		}
		raw := req.Topics[0].Partitions[0].Records
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(raw); err != nil {
			t.Fatal(err)
		}
		if int(batch.Length) != len(raw)-12 || uint32(batch.CRC) != crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)) {
			t.Fatalf("size %d: batch length %d of %d, crc %x", size, batch.Length, len(raw), batch.CRC)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(batch.Records); err != nil || batch.NumRecords != 1 {
			t.Fatalf("size %d: record: %v", size, err)
		}
		if !bytes.HasPrefix(rec.Value, []byte("abc")) && size > 200 {
			t.Fatalf("size %d: value %q", size, rec.Value[:10])
		}
	}
	// Below the overhead the frame is as small as it can be.
	if small := produceFrame("kbench", 10, "kbench"); len(small) > 150 {
		t.Fatalf("smallest frame is %d bytes", len(small))
	}
}

// TestCompare runs two short rounds of direct against kproxy in-process
// and prints the table.
func TestCompare(t *testing.T) {
	b := testBroker(t)
	cfg := shortLoad("")
	cfg.Duration = 300 * time.Millisecond
	targets := []other{{name: "direct", addr: b.Addr()}, {name: "kproxy", addr: testKproxy(t, b.Addr()), pid: os.Getpid()}}
	rows, err := compare(cfg, targets, 2)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printTable(&out, rows, &rows[0].res)
	t.Log("\n" + out.String())
	for _, col := range []string{"req/s vs direct", "+p99", "proxy CPU/req", "100.0%"} {
		if !strings.Contains(out.String(), col) {
			t.Errorf("table lacks %q", col)
		}
	}
	if rows[1].res.Requests == 0 || rows[1].cpu <= 0 {
		t.Errorf("kproxy row: %d requests, cpu %v", rows[1].res.Requests, rows[1].cpu)
	}
	for _, r := range rows {
		if len(r.rounds) != 2 || r.rounds[0].reqPerSec <= 0 {
			t.Errorf("%s: rounds %+v", r.name, r.rounds)
		}
	}
	// A target against itself is 100% in every round; direct has no CPU
	// figure, so only req/s is compared with it.
	out.Reset()
	printRoundRatios(&out, rows[1], rows[1])
	printRoundRatios(&out, rows[1], rows[0])
	want := "kproxy / kproxy, per round: req/s median 100.0% (rounds 100.0%-100.0%)\n" +
		"kproxy / kproxy, per round: CPU/req median 100.0% (rounds 100.0%-100.0%)\n" +
		"kproxy / direct, per round: req/s median "
	if !strings.HasPrefix(out.String(), want) || strings.Count(out.String(), "\n") != 3 {
		t.Errorf("per-round ratios:\n%s", out.String())
	}
}

func TestOtherFlag(t *testing.T) {
	var o otherFlags
	if err := o.Set("socat=127.0.0.1:39094"); err != nil {
		t.Fatal(err)
	}
	if err := o.Set("haproxy=127.0.0.1:39095,pid=42"); err != nil {
		t.Fatal(err)
	}
	if o[0] != (other{"socat", "127.0.0.1:39094", 0}) || o[1] != (other{"haproxy", "127.0.0.1:39095", 42}) {
		t.Fatalf("%+v", o)
	}
	for _, bad := range []string{"", "x", "=1.2.3.4:5", "a=b:1,pid=x"} {
		if (&otherFlags{}).Set(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestProcessCPU(t *testing.T) {
	start, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		// spin until the kernel has charged at least a tick
		if now, _ := processCPU(os.Getpid()); now > start {
			return
		}
	}
	t.Fatal("CPU time did not grow while spinning")
}

// TestClientsAgainstNullBroker runs the real-client mode briefly: franz-go
// producing must be acked; the consumer joins its group and fetches
// (nothing, from a null broker) without error.
func TestClientsAgainstNullBroker(t *testing.T) {
	b := testBroker(t)
	res, err := runClients(context.Background(), clientsConfig{Bootstrap: b.Addr(), Topic: "kbench", Size: 100,
		Duration: time.Second, MaxRecords: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Produced == 0 || res.ProducedBytes != 100*res.Produced || res.ProduceErrors != 0 {
		t.Fatalf("%+v", res)
	}
	t.Logf("%+v", res)
}

// TestLoadPaced offers a rate far below what the null broker takes: the
// schedule, not the responses, decides how many requests go, so a run
// never sends more than rate x duration (one per connection may start at
// the deadline's edge), and every one is answered in order.
func TestLoadPaced(t *testing.T) {
	cfg := shortLoad(testBroker(t).Addr())
	cfg.Rate = 400
	res, err := runLoad(cfg)
	checkLoad(t, res, err)
	if limit := int64(cfg.Rate*cfg.Duration.Seconds()) + int64(cfg.Conns); res.Requests > limit {
		t.Errorf("%d requests at %g req/s for %v: more than the schedule's %d", res.Requests, cfg.Rate, cfg.Duration, limit)
	}
	if res.Offered != cfg.Rate {
		t.Errorf("offered %g, want %g", res.Offered, cfg.Rate)
	}
}

// TestLoadPacedBudget stops a paced run at --max-requests.
func TestLoadPacedBudget(t *testing.T) {
	cfg := shortLoad(testBroker(t).Addr())
	cfg.Rate, cfg.MaxRequests = 100_000, 100
	res, err := runLoad(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 100 {
		t.Errorf("%d requests, want the budget's 100", res.Requests)
	}
}
