package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/tracing"
)

// tlsOrigin is kproxy speaking TLS to kfake and authenticating itself.
type tlsOrigin struct {
	*originEnv
	world *tlsWorld
}

// startTLSOrigin is startOrigin with TLS between kproxy and kfake (the
// stream driver relays every pair), and alice's right password.
func startTLSOrigin(t testing.TB, mech string, kopts []kfake.Opt, tr *tracing.Tracer) *tlsOrigin {
	t.Helper()
	return startTLSOriginWith(t, mech, kopts, originSetup{tr: tr})
}

// startOriginOn is SASL origination (password rightPassword) over the
// netpoll driver, to a plaintext upstream, or with upTLS over the stream
// driver, to a TLS one, with what o adds.
func startOriginOn(t testing.TB, upTLS bool, mech string, kopts []kfake.Opt, o originSetup) *originEnv {
	t.Helper()
	if upTLS {
		return startTLSOriginWith(t, mech, kopts, o).originEnv
	}
	return startOriginWith(t, mech, rightPassword, kopts, o)
}

// startTLSOriginWith is startTLSOrigin with what o adds (its broker and
// setup are the TLS world's).
func startTLSOriginWith(t testing.TB, mech string, kopts []kfake.Opt, o originSetup) *tlsOrigin {
	t.Helper()
	w, broker := newTLSWorld(t, tlsSides{upstream: true}, nil)
	o.broker, o.setup = broker, func(s *Server) { s.SetTLS(w.store, w.metrics) }
	env := startOriginWith(t, mech, rightPassword, kopts, o)
	w.testEnv = env.testEnv
	return &tlsOrigin{originEnv: env, world: w}
}

// runUntilRenewed produces and consumes topic with a franz-go client
// configured without SASL until kproxy has renewed sessions renewals
// times, and checks that every record came back, nothing failed and the
// client never reconnected.
func runUntilRenewed(t *testing.T, env *originEnv, topic string, renewals float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var connects countConnects
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(&connects), kgo.DefaultProduceTopic(topic),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n, l := 0, newLedger()
	for env.auths("reauth", "ok") < renewals {
		if ctx.Err() != nil {
			t.Fatalf("after %d records, %v re-authentications: %v", n, env.auths("reauth", "ok"), ctx.Err())
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: keyOf(n), Value: valueOf(n)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", n, err)
		}
		n++
		fs := cl.PollRecords(ctx, 100)
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { l.add(r.Key, r.Value) })
	}
	for len(l.seen) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", len(l.seen), n, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { l.add(r.Key, r.Value) })
	}
	l.verify(t, n)
	if e := env.auths("reauth", "error"); e != 0 {
		t.Fatalf("%v re-authentications failed", e)
	}
	if opened := env.auths("initial", "ok"); float64(connects.count()) != opened {
		t.Fatalf("the client connected %d times, kproxy authenticated %v upstream connections", connects.count(), opened)
	}
}

// TestSaslOriginOverTLS: kproxy speaks TLS to the broker and
// authenticates over it; a client with neither TLS nor SASL settings
// round-trips records, across re-authentications run by the stream
// driver.
func TestSaslOriginOverTLS(t *testing.T) {
	const topic = "origin-tls"
	w := startTLSOrigin(t, sasl.ScramSHA512, []kfake.Opt{kfake.SeedTopics(2, topic),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1500"})}, nil)
	runUntilRenewed(t, w.originEnv, topic, 4)
	if n := w.world.handshakes("upstream", "ok"); n < 1 {
		t.Fatalf("%v upstream TLS handshakes: the broker was not reached over TLS", n)
	}
	if n := w.keys(36); float64(n) < w.auths("initial", "ok")+4 {
		t.Fatalf("the broker saw %d SaslAuthenticate", n)
	}
}
