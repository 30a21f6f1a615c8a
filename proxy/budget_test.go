package proxy

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// Connections that each hold a large part of a frame are closed once
// together they would pass max_buffered_bytes; the total charged never
// passes it, and a normal client goes on being served (issue 14, item 5).
func TestBufferBudgetBoundsPartialFrames(t *testing.T) {
	const (
		budget = 16 << 20
		frame  = 6 << 20 // each hog announces this much
		sent   = 4 << 20 // and sends this much of it, then waits
		hogs   = 8
	)
	up := startFakeUpstream(t, func(c net.Conn, f []byte) { echoResponse(c, f, []byte{0, 0}) })
	env := startProxy(t, up.addr(), func(cfg *Config, fc *framing.Config, _ *correlate.Config) {
		fc.MaxRequestBytes, fc.MaxResponseBytes = 8<<20, 8<<20
		fc.ReadTimeout = 20 * time.Second // the hogs are not closed for being slow
		cfg.MaxUnreadBytes = 8<<20 + framing.SizeLen
		cfg.MaxBufferedBytes = budget
	})
	normal := dialRaw(t, env.addr)

	// The most ever charged, sampled while the hogs send.
	var peak float64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, testutil.ToFloat64(env.m.Buffered))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()

	conns := make([]net.Conn, hogs)
	var wg sync.WaitGroup
	var closed atomic.Int32 // hogs kproxy closed
	for i := range conns {
		conns[i] = dialRaw(t, env.addr)
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			part := make([]byte, sent)
			binary.BigEndian.PutUint32(part, frame)
			c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			c.Write(part) // fails for a hog closed meanwhile
		}(conns[i])
		go func(c net.Conn) {
			// kproxy never answers a hog: a read ends when it is closed
			// (or when the test closes it, at the end).
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err != nil {
				closed.Add(1)
			}
		}(conns[i])
	}
	wg.Wait()
	// At most budget/sent hogs fit; the rest are closed as they grow.
	waitFor(t, 10*time.Second, "the hogs past the budget closed", func() bool {
		return closed.Load() >= hogs-budget/sent
	})
	waitFor(t, 5*time.Second, "each close counted", func() bool {
		return testutil.ToFloat64(env.m.OverBudget.WithLabelValues("client")) == float64(closed.Load())
	})
	close(stop)
	<-sampled
	t.Logf("peak charged %v, budget closes %v", peak, testutil.ToFloat64(env.m.OverBudget.WithLabelValues("client")))
	if peak > budget {
		t.Fatalf("charged %v bytes at the peak, over max_buffered_bytes %d", peak, budget)
	}
	if !env.logs.contains(`"reason":"client input over max_buffered_bytes"`) {
		t.Fatalf("no close logged for the budget: %s", env.logs)
	}
	// What the live pairs hold is within the budget.
	held := 0
	for _, p := range env.pairs() {
		held += p.Client().Reader().Len()
	}
	if held > budget {
		t.Fatalf("live pairs hold %d bytes, over max_buffered_bytes %d", held, budget)
	}

	// A normal client is served throughout.
	normal.Write(apiVersionsV0(9))
	normal.SetReadDeadline(time.Now().Add(5 * time.Second))
	if f, err := readFrame(normal); err != nil || corrOf(f) != 9 {
		t.Fatalf("normal client: %v", err)
	}

	// Closing the hogs gives back what they held.
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, 10*time.Second, "the budget given back", func() bool {
		return testutil.ToFloat64(env.m.Buffered) == 0 && env.srv.core.Budget.Used() == 0
	})
}

// max_buffered_bytes 0 takes half the cgroup memory limit (v2, else v1),
// else a fixed default.
func TestDefaultMaxBufferedBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   fstest.MapFS
		want int
	}{
		{"no cgroup", fstest.MapFS{}, fallbackBufferedBytes},
		{"unlimited", fstest.MapFS{"sys/fs/cgroup/memory.max": {Data: []byte("max\n")}}, fallbackBufferedBytes},
		{"namespaced", fstest.MapFS{
			"proc/self/cgroup":         {Data: []byte("0::/\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("536870912\n")},
		}, 256 << 20},
		{"own cgroup", fstest.MapFS{
			"proc/self/cgroup":                          {Data: []byte("0::/kubepods/pod1/c1\n")},
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": {Data: []byte("268435456\n")},
			"sys/fs/cgroup/memory.max":                  {Data: []byte("max\n")},
		}, 128 << 20},
		{"garbage", fstest.MapFS{"sys/fs/cgroup/memory.max": {Data: []byte("lots\n")}}, fallbackBufferedBytes},
		{"v1 own cgroup", fstest.MapFS{
			"proc/self/cgroup": {Data: []byte("5:devices:/kubepods/pod1/c1\n4:cpuacct,memory:/kubepods/pod1/c1\n0::/\n")},
			"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes": {Data: []byte("268435456\n")},
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                  {Data: []byte("9223372036854771712\n")},
		}, 128 << 20},
		{"v1 namespaced", fstest.MapFS{
			"proc/self/cgroup":                           {Data: []byte("4:memory:/\n")},
			"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("536870912\n")},
		}, 256 << 20},
		{"v1 unlimited", fstest.MapFS{
			"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712\n")},
		}, fallbackBufferedBytes},
	} {
		if got, _ := defaultMaxBufferedBytes(tc.fs); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
