//go:build linux

package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/stream"
)

// sysctlInt reads a number from /proc/sys.
func sysctlInt(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// pairBuffers reports SO_SNDBUF and SO_RCVBUF of every socket of srv's
// pairs, client and upstream sides.
func pairBuffers(t *testing.T, srv *Server) (snd, rcv []int) {
	t.Helper()
	for _, p := range serverPairs(srv) {
		for _, c := range []interface{ Fd() int }{p.Client().(interface{ Fd() int }), p.Upstream().(interface{ Fd() int })} {
			s, err := syscall.GetsockoptInt(c.Fd(), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
			if err != nil {
				t.Fatal(err)
			}
			r, err := syscall.GetsockoptInt(c.Fd(), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
			if err != nil {
				t.Fatal(err)
			}
			snd, rcv = append(snd, s), append(rcv, r)
		}
	}
	return snd, rcv
}

// Both sockets of a pair get the buffers configured, as far as the host's
// net.core.wmem_max and rmem_max let them; when those cap a value, kproxy
// says so once.
func TestSocketBuffersReachBothSockets(t *testing.T) {
	const send, recv = 300 << 10, 200 << 10
	env := startKfake(t, nil, func(cfg *Config, _ *framing.Config, _ *correlate.Config) {
		cfg.SocketSendBufferBytes, cfg.SocketReceiveBufferBytes = send, recv
	})
	pingKfake(t, env)
	wantSnd := 2 * min(send, sysctlInt(t, "net.core.wmem_max"))
	wantRcv := 2 * min(recv, sysctlInt(t, "net.core.rmem_max"))
	snd, rcv := pairBuffers(t, env.srv)
	if len(snd) < 2 {
		t.Fatalf("%d sockets in pairs, want at least one pair", len(snd))
	}
	for i := range snd {
		if snd[i] != wantSnd || rcv[i] != wantRcv {
			t.Errorf("socket %d: SO_SNDBUF %d, SO_RCVBUF %d; want %d and %d", i, snd[i], rcv[i], wantSnd, wantRcv)
		}
	}
	capped := wantSnd < 2*send || wantRcv < 2*recv
	if got := env.logs.contains("the kernel capped the socket buffers"); got != capped {
		t.Errorf("capped log line present: %v, want %v (wmem_max/rmem_max give %d/%d)", got, capped, wantSnd/2, wantRcv/2)
	}
}

// pingKfake has franz-go reach kfake through kproxy, and keeps its client
// (and so its pairs) open until the test ends.
func pingKfake(t *testing.T, env *testEnv) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("ping through kproxy: %v", err)
	}
}

// bigValue is record i's value: 200-700 KiB that say which record they are.
func bigValue(i int) []byte {
	n := 200<<10 + (i*37<<10)%(500<<10)
	return bytes.Repeat([]byte(fmt.Sprintf("[%06d]", i)), n/8)
}

// franz-go produces large records through kproxy with small socket
// buffers (every write of a large frame is partial) while another client
// sends half a large frame and hangs up; the records arrive intact and in
// order, and the broken connection harms nobody else.
func TestFranzGoLargeRecordsWithSmallSocketBuffers(t *testing.T) {
	// A 16 KiB send buffer (32 KiB as the kernel counts it) takes a
	// large frame in dozens of writes; the receive buffer is left to the
	// kernel, since a fixed 4 KiB window on loopback, whose segments are
	// 64 KiB, moves about 100 KB/s (delayed acks).
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(2, "big")}, func(cfg *Config, _ *framing.Config, _ *correlate.Config) {
		cfg.SocketSendBufferBytes, cfg.SocketReceiveBufferBytes = 16<<10, 0
		cfg.LargeFrameSendBufferBytes = 16 << 10
	})
	via := &onlyVia{addr: env.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(via), kgo.DefaultProduceTopic("big"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedBytes(8<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression())) // large frames on the wire
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	// The broken client: a frame announced at 1 MiB, half of it sent.
	bad := dialRaw(t, env.addr)
	half := make([]byte, 512<<10)
	copy(half, []byte{0x00, 0x10, 0x00, 0x00, 0, 0, 0, 9, 0, 0, 0, 1})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		bad.Write(half)
		bad.Close()
	}()

	const n = 40
	var perr error
	var pmu sync.Mutex
	for i := 0; i < n; i++ {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Partition: int32(i % 2), Key: keyOf(i), Value: bigValue(i)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				pmu.Lock()
				perr = errors.Join(perr, err)
				pmu.Unlock()
			}
		})
	}
	wg.Wait()
	if perr != nil {
		t.Fatalf("produce: %v", perr)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(via), kgo.ConsumeTopics("big"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(4<<20), kgo.FetchMaxPartitionBytes(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := [2]int{0, 1} // the record each partition must give next
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume after %d records: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			want := next[r.Partition]
			if !bytes.Equal(r.Key, keyOf(want)) {
				t.Fatalf("partition %d: record %q where %q was next", r.Partition, r.Key, keyOf(want))
			}
			if !bytes.Equal(r.Value, bigValue(want)) {
				t.Fatalf("record %d: value of %d bytes differs from the %d produced", want, len(r.Value), len(bigValue(want)))
			}
			next[r.Partition] += 2
			got++
		})
	}
	via.check(t)
	waitFor(t, 5*time.Second, "the broken client's close", func() bool { return env.logs.contains("connection closed") })
}

// max_unread_bytes still closes a client whose large frames pile up at
// an upstream that stopped reading, with the socket buffers set.
func TestUnreadBoundHoldsWithSocketBuffers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go acceptAndNeverRead(ln)
	env := startProxy(t, ln.Addr().String(), func(cfg *Config, fc *framing.Config, _ *correlate.Config) {
		fc.MaxRequestBytes, fc.MaxResponseBytes = 2<<20, 2<<20
		cfg.MaxUnreadBytes = 4 << 20
		cfg.SocketSendBufferBytes, cfg.SocketReceiveBufferBytes = 64<<10, 64<<10
	})
	c := dialRaw(t, env.addr)
	req := produceRequest(7, 0, "flood")
	req.Topics[0].Partitions[0].Records = make([]byte, 1<<20)
	frame := encodeRequest(req, 1)
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	for sent := 0; sent < 256<<20 && err == nil; sent += len(frame) {
		_, err = c.Write(frame)
		time.Sleep(time.Millisecond)
	}
	if err == nil {
		t.Fatal("256 MiB written without kproxy closing the connection")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("kproxy neither read nor closed for 30 s: %v", err)
	}
	waitFor(t, 5*time.Second, "overflow close counted", func() bool {
		return testutil.ToFloat64(env.m.Overflow.WithLabelValues("client")) == 1
	})
}

// The stream driver's sockets (TLS on either side) get the buffers too.
func TestSocketBuffersReachStreamSockets(t *testing.T) {
	const send = 300 << 10
	w := startTLSKfake(t, tlsSides{upstream: true}, nil, nil, func(cfg *Config, _ *framing.Config, _ *correlate.Config) {
		cfg.SocketSendBufferBytes = send
	})
	pingKfake(t, w.testEnv)
	want := 2 * min(send, sysctlInt(t, "net.core.wmem_max"))
	streams := 0
	for _, sc := range w.srv.core.Conns() {
		client, upstream, ok := stream.Sockets(sc)
		if !ok {
			continue
		}
		streams++
		for side, c := range map[string]net.Conn{"client": client, "upstream": upstream} {
			tcp, ok := c.(*net.TCPConn)
			if !ok {
				t.Fatalf("%s side is a %T, not a TCP connection", side, c)
			}
			raw, err := tcp.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var got int
			var gerr error
			if err := raw.Control(func(fd uintptr) {
				got, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
			}); err != nil || gerr != nil {
				t.Fatal(errors.Join(err, gerr))
			}
			if got != want {
				t.Errorf("%s side: SO_SNDBUF %d, want %d", side, got, want)
			}
		}
	}
	if streams == 0 {
		t.Fatal("no stream pairs open: TLS to the upstream did not take the stream driver")
	}
}

// large_frame_send_buffer_bytes reaches the upstream socket of the pair
// that carried a large request, and no other.
func TestLargeFrameSendBufferOnlyWhereLargeFramesWent(t *testing.T) {
	const large = 300 << 10
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "big")}, func(cfg *Config, _ *framing.Config, _ *correlate.Config) {
		cfg.SocketSendBufferBytes, cfg.LargeFrameSendBufferBytes = 0, large
	})
	pingKfake(t, env) // a client with small requests only
	produceLarge(t, env)
	want := 2 * min(large, sysctlInt(t, "net.core.wmem_max"))
	sized, pairs := 0, 0
	for _, p := range env.pairs() {
		pairs++
		got, err := syscall.GetsockoptInt(p.Upstream().(interface{ Fd() int }).Fd(), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
		if err != nil {
			t.Fatal(err)
		}
		if got == want {
			sized++
		}
		if (got == want) != p.LargeSendBuffer() {
			t.Errorf("upstream SO_SNDBUF %d (large buffer %d) on a pair that relayed a large frame: %v", got, want, p.LargeSendBuffer())
		}
	}
	if sized != 1 || pairs < 2 {
		t.Fatalf("%d of %d pairs have the large-frame send buffer, want exactly 1 (the producer's) of at least 2", sized, pairs)
	}
}

// The large-frame send buffer never shrinks a larger one set for every
// socket: a producer of large frames keeps socket_send_buffer_bytes.
func TestLargeFrameSendBufferKeepsALargerSetOne(t *testing.T) {
	const set, large = 400 << 10, 300 << 10
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "big")}, func(cfg *Config, _ *framing.Config, _ *correlate.Config) {
		cfg.SocketSendBufferBytes, cfg.LargeFrameSendBufferBytes = set, large
	})
	produceLarge(t, env)
	want := 2 * min(set, sysctlInt(t, "net.core.wmem_max"))
	pairs := 0
	for _, p := range env.pairs() {
		got, err := syscall.GetsockoptInt(p.Upstream().(interface{ Fd() int }).Fd(), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("upstream SO_SNDBUF %d, want the set %d", got, want)
		}
		pairs++
	}
	if pairs == 0 {
		t.Fatal("no pair open: the test checked nothing")
	}
}

// produceLarge produces one large uncompressed record to topic "big"
// through env, so its pair relays a request batch over 64 KiB. The
// producer stays open until the test ends, so the test can still find
// its pairs.
func produceLarge(t *testing.T, env *testEnv) {
	t.Helper()
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.DefaultProduceTopic("big"), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: bigValue(3)}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}
