package proxy

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// When a relay's charge takes the budget past its bound and its own pair
// holds the most, the pair is closed blamed on the side whose input it
// mostly holds, as the sweep blames it: here a partial response, not the
// client's request that was charged last (issue 14, item 5).
func TestBufferBudgetBlamesTheSideThatHoldsMost(t *testing.T) {
	const (
		frame   = 1 << 20
		partial = 900 << 10 // of a response frame, sent and then nothing
		request = 200 << 10 // of a request: with the partial response, over the budget
	)
	up := startFakeUpstream(t, func(c net.Conn, f []byte) {
		if len(f) > 64 { // the large request: never answered
			return
		}
		out := make([]byte, partial)
		binary.BigEndian.PutUint32(out, frame-framing.SizeLen)
		copy(out[4:8], f[8:12])
		c.Write(out)
	})
	env := startProxy(t, up.addr(), func(cfg *Config, fc *framing.Config, _ *correlate.Config) {
		fc.MaxRequestBytes, fc.MaxResponseBytes = frame, frame
		fc.ReadTimeout = 30 * time.Second
		cfg.MaxBufferedBytes = frame + framing.SizeLen
	})
	c := dialRaw(t, env.addr)
	if _, err := c.Write(apiVersionsV0(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the partial response charged", func() bool {
		return env.srv.core.Budget.Used() >= partial
	})
	// Part of a request, so it waits partial, and is charged, until the
	// budget refuses it.
	c.Write(paddedApiVersions(2, 2*request)[:request]) // may fail once kproxy closes
	expectClosed(t, c, 10*time.Second)
	waitFor(t, 5*time.Second, "the close counted", func() bool {
		return testutil.ToFloat64(env.m.OverBudget.WithLabelValues("client"))+
			testutil.ToFloat64(env.m.OverBudget.WithLabelValues("upstream")) == 1
	})
	if n := testutil.ToFloat64(env.m.OverBudget.WithLabelValues("upstream")); n != 1 {
		t.Fatalf("closed blamed on the client, want the upstream whose partial response is most of the charge (kproxy: %s)", env.logs)
	}
	if !env.logs.contains(`"reason":"upstream input over max_buffered_bytes"`) {
		t.Fatalf("no close logged for the upstream's input: %s", env.logs)
	}
}
