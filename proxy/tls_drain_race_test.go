package proxy

import (
	"crypto/tls"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/policy"
)

// Drains racing clients that keep sending, over TLS: every request the
// broker answered is delivered, none sent after the drain began, kproxy's
// own answers included, and no relay goroutine is left behind.
func TestTLSDrainRacingRequests(t *testing.T) {
	const clients = 8
	deadline := time.Now().Add(6 * time.Second)
	for round := 0; round < 100 && time.Now().Before(deadline); round++ {
		b := startCountingBroker(t, clients)
		w := startTLSProxy(t, b.ln.Addr().String(), false)
		env := w.testEnv
		if round%2 == 1 { // half the rounds: kproxy answers Metadata itself, in place
			applyPolicies(t, env, policy.Rule{Name: "nometa", Action: policy.ActionReject,
				Match: policy.Selector{APIs: []string{"Metadata"}}})
		}
		cfg := w.clientTLS(t, tlsSides{client: true}, "")
		conns := make([]net.Conn, clients)
		for k := range conns {
			c, err := tls.Dial("tcp", env.addr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			conns[k] = c
		}
		meta := round%2 == 1
		raceDrain(t, round, env, b, conns, func(n int32) ([]byte, bool) {
			if meta && n%2 == 1 { // answered by kproxy
				m := kmsg.NewPtrMetadataRequest()
				m.Version = 1
				return encodeRequest(m, n), false
			}
			return apiVersionsV0(n), true
		})
	}
	buf := make([]byte, 1<<20)
	left := func() bool { return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*stream).run") }
	for deadline := time.Now().Add(10 * time.Second); left(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stream goroutines left 10 s after every pair closed:\n%s", buf[:runtime.Stack(buf, true)])
		}
	}
}
