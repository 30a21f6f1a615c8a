package proxy

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

// Under a per-connection 2/s rule, share and streams group heartbeats go
// to the broker like the other heartbeats (before, 48 of 50 share
// heartbeats were refused with POLICY_VIOLATION and the share consumer lost
// its membership); a flood of ConsumerGroupHeartbeat past ten times the
// rate closes the connection with the rule in the log (before, 50 of 50
// went to the broker). Issue 27, item 10.
func TestPolicyHeartbeatsExemptWithACeiling(t *testing.T) {
	var took atomic.Int32
	up := startFakeUpstream(t, func(c net.Conn, f []byte) {
		took.Add(1)
		echoResponse(c, f, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	})
	env := startProxy(t, up.addr())
	ps := applyPolicies(t, env, policy.Rule{Name: "two-a-second", Action: policy.ActionReject,
		Limits: policy.Limits{RequestsPerSecond: 2, Key: "connection"}})

	c := dialRaw(t, env.addr)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	beats := []kmsg.Request{kmsg.NewPtrShareGroupHeartbeatRequest(), kmsg.NewPtrStreamsGroupHeartbeatRequest()}
	const each = 8 // 16 in all: within the ceiling of 20
	for i := range each * len(beats) {
		if _, err := c.Write(encodeRequest(beats[i%len(beats)], int32(i))); err != nil {
			t.Fatal(err)
		}
		if _, err := readFrame(c); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	if n := took.Load(); n != each*int32(len(beats)) {
		t.Fatalf("the broker took %d of %d share and streams heartbeats: kproxy refused some", n, each*len(beats))
	}

	flood := dialRaw(t, env.addr)
	for i := range 50 {
		if _, err := flood.Write(encodeRequest(kmsg.NewPtrConsumerGroupHeartbeatRequest(), int32(i))); err != nil {
			break // closed meanwhile
		}
	}
	expectClosed(t, flood, 10*time.Second)
	waitFor(t, 10*time.Second, "the close logged", func() bool {
		return env.logs.contains("closed by policy rule two-a-second") && env.logs.contains("ConsumerGroupHeartbeat over 10 times")
	})
	waitFor(t, 10*time.Second, "the close counted", func() bool {
		return ps.count(t, "kproxy_policy_closed_total", "two-a-second") == 1
	})
	if n := took.Load(); n >= each*int32(len(beats))+50 {
		t.Fatalf("all 50 flooded heartbeats reached the broker")
	}
}
