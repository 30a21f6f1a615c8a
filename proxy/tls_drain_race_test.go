package proxy

import (
	"context"
	"crypto/tls"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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
		var got atomic.Int64
		var started, ended sync.WaitGroup
		started.Add(clients)
		ended.Add(clients)
		for range clients {
			c, err := tls.Dial("tcp", env.addr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			meta := round%2 == 1
			go func() {
				defer ended.Done()
				first := sync.OnceFunc(started.Done)
				defer first()
				for n := int32(0); ; n++ {
					req := apiVersionsV0(n)
					isMeta := meta && n%2 == 1
					if isMeta {
						m := kmsg.NewPtrMetadataRequest()
						m.Version = 1
						req = encodeRequest(m, n)
					}
					if _, err := c.Write(req); err != nil {
						return
					}
					f, err := readFrame(c)
					if err != nil {
						return
					}
					if corrOf(f) != n {
						t.Errorf("response %d for request %d", corrOf(f), n)
					}
					if !isMeta {
						got.Add(1)
					}
					first()
				}
			}()
		}
		started.Wait()
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := env.srv.Drain(ctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: drain: %v", round, err)
		}
		ended.Wait()
		b.wg.Wait()
		if took, got := b.took.Load(), got.Load(); took != got {
			t.Fatalf("round %d: broker read %d, clients got %d", round, took, got)
		}
	}
	buf := make([]byte, 1<<20)
	left := func() bool { return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*stream).run") }
	for deadline := time.Now().Add(10 * time.Second); left(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stream goroutines left 10 s after every pair closed:\n%s", buf[:runtime.Stack(buf, true)])
		}
	}
}
