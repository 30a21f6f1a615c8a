package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kproxy/kproxy/policy"
)

// The stream driver runs the same Kafka session as the netpoll one: these
// are the session's behaviours that need a driver's help (kproxy's own
// answers, waits, dropping a refused body as it arrives, draining), over
// TLS on both sides.

// A produce over max_request_bytes is answered by kproxy, its body
// dropped as it arrives, and the connection goes on; a produce to a
// denied topic is answered in its place among pipelined ones.
func TestTLSRefusalsAnsweredInPlace(t *testing.T) {
	sides := tlsSides{client: true, upstream: true}
	w := startTLSKfake(t, sides, []kfake.Opt{kfake.SeedTopics(1, "big", "secret", "public")}, nil)
	applyPolicies(t, w.testEnv, denySecret, policy.Rule{Name: "max", Action: policy.ActionReject,
		Limits: policy.Limits{MaxRequestBytes: 1 << 20}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.addr), kgo.DialTLSConfig(w.clientTLS(t, sides, "")),
		kgo.ProducerBatchMaxBytes(8<<20), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: []byte("small")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	accepted := w.accepted()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: []byte(strings.Repeat("x", 4<<20))}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("4 MiB produce: %v, want MESSAGE_TOO_LARGE", err)
	}
	if n := testutil.ToFloat64(w.m.Relay.OversizeAnswered); n != 1 {
		t.Fatalf("oversize answered = %v, want 1", n)
	}
	results := make(chan error, 40)
	for i := range 40 {
		topic := "public"
		if i%3 == 0 {
			topic = "secret"
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}, func(r *kgo.Record, err error) {
			if (r.Topic == "secret") != errors.Is(err, kerr.TopicAuthorizationFailed) {
				results <- errors.New(r.Topic + ": " + errString(err))
				return
			}
			results <- nil
		})
	}
	for range 40 {
		if err := <-results; err != nil {
			t.Fatalf("pipelined produce answered wrongly: %v", err)
		}
	}
	if w.accepted() != accepted {
		t.Fatal("the client had to reconnect after a refusal")
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// SASL goes through the TLS pair untouched: the client authenticates to
// the broker with its own credentials.
func TestTLSSaslPassesThrough(t *testing.T) {
	sides := tlsSides{client: true, upstream: true}
	w := startTLSKfake(t, sides, []kfake.Opt{kfake.SeedTopics(1, "t"), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "admin", "secret")}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pass := range []string{"secret", "wrong"} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(w.addr), kgo.DialTLSConfig(w.clientTLS(t, sides, "")),
			kgo.SASL(plain.Auth{User: "admin", Pass: pass}.AsMechanism()), kgo.RecordRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		err = cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()
		cl.Close()
		if (pass == "secret") != (err == nil) {
			t.Fatalf("PLAIN with password %q: %v", pass, err)
		}
	}
}

// A drain over TLS lets the request in flight get its answer, then
// closes the connection.
func TestTLSDrainFinishesInFlight(t *testing.T) {
	up := startFakeUpstream(t, func(c net.Conn, f []byte) {
		time.Sleep(300 * time.Millisecond)
		echoResponse(c, f, []byte{0, 0})
	})
	w := startTLSProxy(t, up.addr(), false)
	c, err := tls.Dial("tcp", w.addr, w.clientTLS(t, tlsSides{client: true}, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(apiVersionsV0(31)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the request in flight", func() bool { return testutil.ToFloat64(w.m.Relay.InFlight) == 1 })
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		drained <- w.srv.Drain(ctx)
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := readFrame(c)
	if err != nil || corrOf(f) != 31 {
		t.Fatalf("in-flight request lost in drain: %v", err)
	}
	expectClosed(t, c, 5*time.Second)
	if err := <-drained; err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// A throttle holds a TLS client back the way a broker quota does: its
// answers carry throttle_time_ms and every record still arrives.
func TestTLSThrottle(t *testing.T) {
	sides := tlsSides{client: true, upstream: true}
	w := startTLSKfake(t, sides, []kfake.Opt{kfake.SeedTopics(1, "t")}, nil)
	ps := applyPolicies(t, w.testEnv, policy.Rule{Name: "slow", Action: policy.ActionThrottle,
		Match:  policy.Selector{APIs: []string{"Produce"}},
		Limits: policy.Limits{RequestsPerSecond: 20, Key: "connection"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.addr), kgo.DialTLSConfig(w.clientTLS(t, sides, "")), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 60 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if n := ps.count(t, "kproxy_policy_throttled_total", "slow"); n == 0 {
		t.Fatal("no produce was throttled")
	}
}
