package proxy

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

// A heartbeat is never held back by a throttle (policy.Exempt): one sent
// while the client is muted is relayed at once, as on netpoll.
func TestDriversHeartbeatDuringThrottle(t *testing.T) {
	for _, name := range []string{"netpoll", "tls"} {
		t.Run(name, func(t *testing.T) {
			var env *testEnv
			var c net.Conn
			kopts := []kfake.Opt{kfake.SeedTopics(1, "f")}
			if name == "netpoll" {
				env = startKfake(t, kopts)
				c = dialRaw(t, env.addr)
			} else {
				sides := tlsSides{client: true}
				w := startTLSKfake(t, sides, kopts, nil)
				env = w.testEnv
				var err error
				if c, err = tls.Dial("tcp", w.addr, w.clientTLS(t, sides, "")); err != nil {
					t.Fatal(err)
				}
				defer c.Close()
			}
			applyPolicies(t, env, policy.Rule{Name: "slow", Action: policy.ActionThrottle,
				Match:  policy.Selector{APIs: []string{"Fetch"}},
				Limits: policy.Limits{RequestsPerSecond: 1, Key: "connection"}})
			var throttle int32
			for corr := int32(0); throttle < 1000 && corr < 50; corr++ {
				c.Write(encodeRequest(fetchV11("f"), corr))
				c.SetReadDeadline(time.Now().Add(15 * time.Second))
				f, err := readFrame(c)
				if err != nil {
					t.Fatal(err)
				}
				throttle = decodeResponse(t, f, 1, 11).(*kmsg.FetchResponse).ThrottleMillis
			}
			t.Logf("muted for %d ms", throttle)
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Version, hb.Group, hb.Generation, hb.MemberID = 3, "g", 1, "m"
			start := time.Now()
			c.Write(encodeRequest(hb, 999))
			c.SetReadDeadline(time.Now().Add(15 * time.Second))
			f, err := readFrame(c)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			t.Logf("heartbeat (corr %d) answered after %v", corrOf(f), took)
			if took > time.Second {
				t.Errorf("heartbeat held back %v by a throttle of %d ms", took, throttle)
			}
		})
	}
}
