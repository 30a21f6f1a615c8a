package proxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/core"
)

// serialRoundTrips sends n ApiVersions requests one at a time through
// env and checks each answer's correlation id.
func serialRoundTrips(t *testing.T, env *testEnv, n int) {
	t.Helper()
	c := dialRaw(t, env.addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for i := 0; i < n; i++ {
		if _, err := c.Write(apiVersionsV0(int32(i))); err != nil {
			t.Fatal(err)
		}
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d: %v\nkproxy's log:\n%s", i, err, env.logs)
		}
		if got := corrOf(f); got != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, got)
		}
	}
}

func batches(env *testEnv, dir, where int) float64 {
	return testutil.ToFloat64(env.m.Batch[dir][where])
}

// With linger 0 (the default) whole frames are relayed on the poller in
// both directions; the response side needs the upstream connection's
// context, which netpoll has no option for.
// How many batches take the poller is the scheduler's business on a
// loaded machine, so the test asserts only that each direction can: it
// goes on, in rounds of 50, until both have, and fails after 500.
func TestSerialBatchesRelayOnThePoller(t *testing.T) {
	env := startKfake(t, nil)
	for n := 0; n < 500; n += 50 {
		serialRoundTrips(t, env, 50)
		if batches(env, core.BatchRequests, core.OnPoller) > 0 && batches(env, core.BatchResponses, core.OnPoller) > 0 {
			return
		}
	}
	for dir, name := range []string{"requests", "responses"} {
		if got := batches(env, dir, core.OnPoller); got == 0 {
			t.Errorf("%s: none of 500 serial batches relayed on the poller (pool: %v)", name, batches(env, dir, core.InPool))
		}
	}
}

// A linger keeps a goroutine per busy connection: nothing runs on the
// poller.
func TestLingerKeepsBatchesInThePool(t *testing.T) {
	env := startKfake(t, nil, func(c *Config, _ *framing.Config, _ *correlate.Config) { c.Linger = 5 * time.Millisecond })
	serialRoundTrips(t, env, 20)
	for dir, name := range []string{"requests", "responses"} {
		if got := batches(env, dir, core.OnPoller); got != 0 {
			t.Errorf("%s: %v batches relayed on the poller with a linger", name, got)
		}
	}
}

// When a socket does not take a whole batch, the rest is flushed by a
// goroutine, and everything sent after it waits: a client that stops
// reading while large responses pile up, and an upstream that stops
// reading while requests pile up, still get every frame whole and in
// order.
func TestSlowPeersKeepOrderAcrossHandOffs(t *testing.T) {
	const n, respBody = 400, 48 << 10
	body := make([]byte, respBody)
	pause := make(chan struct{})
	up := startFakeUpstream(t, func(c net.Conn, req []byte) {
		if corrOf(req) == 0 {
			<-pause // requests pile up in kproxy's upstream socket
		}
		echoResponse(c, req, body)
	})
	env := startProxy(t, up.addr(), func(_ *Config, _ *framing.Config, cc *correlate.Config) { cc.MaxInFlight = n })
	c := dialRaw(t, env.addr)
	req := make([]byte, 4<<10)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	binary.BigEndian.PutUint16(req[4:], 18) // ApiVersions v0, header v1
	go func() {
		for i := 0; i < n; i++ {
			binary.BigEndian.PutUint32(req[8:], uint32(i))
			binary.BigEndian.PutUint16(req[12:], 0) // empty client id
			if _, err := c.Write(req); err != nil {
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	close(pause)
	time.Sleep(300 * time.Millisecond) // responses pile up while the client does not read
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := 0; i < n; i++ {
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if corrOf(f) != int32(i) || len(f) != 8+respBody {
			t.Fatalf("response %d: correlation id %d, %d bytes", i, corrOf(f), len(f))
		}
	}
}

// Pairs closed from other goroutines (Drain's deadline, the overflow
// sweep, the other side's close callback) while their batches run on the
// poller must not hang it: netpoll finishes such a close inside the task,
// which on the poller would wait for itself.
func TestClosingPairsWhileTheyRelayOnThePoller(t *testing.T) {
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	env := startProxy(t, up.addr())
	var batch []byte
	for i := 0; i < 8; i++ {
		batch = append(batch, apiVersionsV0(int32(i))...)
	}
	stop := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				c, err := net.Dial("tcp", env.addr)
				if err != nil {
					continue
				}
				go io.Copy(io.Discard, c)
				c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				for k := 0; k < 20; k++ {
					if _, err := c.Write(batch); err != nil {
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
				c.Close()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for time.Now().Before(stop) {
			for _, p := range env.pairs() {
				p.Conn().Close("test", nil)
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	wg.Wait()
	if got := batches(env, core.BatchRequests, core.OnPoller); got == 0 {
		t.Fatal("no batch ran on the poller; the test did not test anything")
	}
	// Every poller still serves: new connections land on each in turn.
	for i := 0; i < 8; i++ {
		c := dialRaw(t, env.addr)
		c.SetDeadline(time.Now().Add(3 * time.Second))
		c.Write(apiVersionsV0(7))
		if f, err := readFrame(c); err != nil || corrOf(f) != 7 {
			var dump bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&dump, 1)
			t.Fatalf("connection %d after the closes: %v\ngoroutines:\n%s", i, err, dump.String())
		}
		c.Close()
	}
}

// A rule set that cannot throttle lets batches run on the poller; kproxy's
// answers to the requests it refuses are written by a goroutine, and must
// still come back in request order among the broker's own responses. Every
// round asserts the order. Whether a given batch runs on the poller is the
// scheduler's business (a loaded machine may hand every one to the pool),
// so rounds go on until one has, up to a bound, and the split is logged,
// never asserted.
func TestRefusalsOnThePollerKeepOrder(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "secret", "public")})
	applyPolicies(t, env, denySecret)
	c := dialRaw(t, env.addr)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	const n, minRounds, maxRounds = 40, 5, 60
	topic := func(i int) string {
		if i%3 == 1 {
			return "secret"
		}
		return "public"
	}
	round := 0
	for ; round < maxRounds && (round < minRounds || batches(env, core.BatchRequests, core.OnPoller) == 0); round++ {
		var batch []byte
		for i := 0; i < n; i++ {
			batch = append(batch, encodeRequest(produceRequest(7, 1, topic(i)), int32(round*n+i))...)
		}
		if _, err := c.Write(batch); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			f, err := readFrame(c)
			if err != nil {
				t.Fatalf("round %d, response %d: %v\nkproxy's log:\n%s", round, i, err, env.logs)
			}
			if got := corrOf(f); got != int32(round*n+i) {
				t.Fatalf("round %d, response %d has correlation id %d", round, i, got)
			}
			resp := decodeResponse(t, f, 0, 7).(*kmsg.ProduceResponse)
			code := resp.Topics[0].Partitions[0].ErrorCode
			if want := topic(i) == "secret"; want != (code == kerr.TopicAuthorizationFailed.Code) {
				t.Fatalf("response %d for %s: error code %d", i, topic(i), code)
			}
		}
	}
	t.Logf("%d rounds: %v request batches on the poller, %v in the pool", round,
		batches(env, core.BatchRequests, core.OnPoller), batches(env, core.BatchRequests, core.InPool))
}
