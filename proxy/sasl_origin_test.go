package proxy

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/sasl"
)

// roundTripFranz produces n records with a franz-go client configured
// without SASL and reads them back; every dial must be kproxy's.
func roundTripFranz(t *testing.T, env *testEnv, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	via := &onlyVia{addr: env.addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(via), kgo.DefaultProduceTopic(topic),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: keyOf(i), Value: valueOf(i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	l := newLedger()
	for len(l.seen) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", len(l.seen), n, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { l.add(r.Key, r.Value) })
	}
	via.check(t)
}

// TestSaslOriginationMechanisms: kproxy authenticates to a broker that
// requires SASL with each mechanism kfake has, and a client with no SASL
// settings round-trips records through it.
func TestSaslOriginationMechanisms(t *testing.T) {
	for _, mech := range []string{sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			env := startOrigin(t, mech, rightPassword, []kfake.Opt{kfake.SeedTopics(2, "origin")})
			roundTripFranz(t, env.testEnv, "origin", 200)
			if n := env.auths("initial", "ok"); n < 1 {
				t.Fatalf("%v initial authentications counted", n)
			}
			if env.keys(36) < 1 {
				t.Fatal("no SaslAuthenticate reached the broker")
			}
			if err := env.srv.Ready(context.Background()); err != nil {
				t.Fatalf("Ready: %v", err)
			}
			if !env.logs.contains(`"upstream_principal":"alice"`) {
				t.Fatalf("no connection log names the principal:\n%s", env.logs)
			}
		})
	}
}

// TestSaslOriginationWrongPassword: with credentials the broker refuses,
// the client is reset as for an unreachable broker, the broker's reason
// is logged without the secret, counted, and kproxy is not ready until a
// corrected file is read.
func TestSaslOriginationWrongPassword(t *testing.T) {
	const wrong = "Wr0ng-Pa55-do-not-log"
	env := startOrigin(t, sasl.ScramSHA256, wrong, []kfake.Opt{kfake.SeedTopics(1, "origin")})
	c := dialRaw(t, env.addr)
	c.Write(apiVersionsV0(1))
	expectClosed(t, c, 10*time.Second)
	waitFor(t, 10*time.Second, "the failure counted", func() bool { return env.auths("initial", "error") >= 1 })
	if err := env.srv.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "authentication") {
		t.Fatalf("Ready with refused credentials: %v", err)
	}
	if strings.Contains(env.logs.String(), wrong) {
		t.Fatalf("the password reached the log:\n%s", env.logs)
	}
	if !env.logs.contains("upstream authentication failed") {
		t.Fatalf("no log line for the refusal:\n%s", env.logs)
	}
	writeSecret(t, env.dir, "password", rightPassword) // the Secret is fixed
	roundTripFranz(t, env.testEnv, "origin", 20)
	// The failing result may be reused for readyCache.
	waitFor(t, 10*time.Second, "ready after the fix", func() bool { return env.srv.Ready(context.Background()) == nil })
}

// TestSaslOriginationReauthenticates: with connections.max.reauth.ms set,
// kproxy re-authenticates each upstream connection before its session
// ends, between the client's requests, which go on without an error or a
// reconnect.
func TestSaslOriginationReauthenticates(t *testing.T) {
	env := startOrigin(t, sasl.ScramSHA512, rightPassword, []kfake.Opt{kfake.SeedTopics(2, "reauth"),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1500"})})
	runUntilRenewed(t, env, "reauth", 6)
	opened := testutil.ToFloat64(env.m.Accepted)
	// No connection was lost under the client: every close kproxy logged
	// is the client's own (at its end).
	for _, line := range strings.Split(env.logs.String(), "\n") {
		if strings.Contains(line, `"connection closed"`) && !strings.Contains(line, `"reason":"client closed"`) {
			t.Fatalf("a connection was closed under the client: %s", line)
		}
	}
	if a := env.keys(36); float64(a) < opened+6 {
		t.Fatalf("%d SaslAuthenticate reached the broker for %v connections and 6 renewals", a, opened)
	}
}

// countConnects counts a franz-go client's successful dials.
type countConnects struct{ n atomic.Int64 }

func (c *countConnects) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	if err == nil && conn != nil {
		c.n.Add(1)
	}
}

func (c *countConnects) count() int { return int(c.n.Load()) }

// roundTripKmsg sends req on c and decodes its answer.
func roundTripKmsg(t testing.TB, c net.Conn, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	_, resp := clusterRoundTrip(t, c, req, corr)
	return resp
}

// TestSaslOriginationRefusesClientSasl: a client that tries its own SASL
// while kproxy authenticates gets ILLEGAL_SASL_STATE from kproxy, the
// broker never sees it, and the SASL APIs are not offered.
func TestSaslOriginationRefusesClientSasl(t *testing.T) {
	env := startOrigin(t, sasl.Plain, rightPassword, nil)
	c := dialRaw(t, env.addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	for _, k := range roundTripKmsg(t, c, av, 7).(*kmsg.ApiVersionsResponse).ApiKeys {
		if k.ApiKey == 17 || k.ApiKey == 36 || (k.ApiKey >= 38 && k.ApiKey <= 41) {
			t.Fatalf("ApiVersions offers key %d while kproxy authenticates itself", k.ApiKey)
		}
	}
	before := env.keys(17) // kproxy's own authentication is done once it answered
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	resp := roundTripKmsg(t, c, hs, 5).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake answered %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 2, []byte("\x00mallory\x00pw")
	aresp := roundTripKmsg(t, c, auth, 6).(*kmsg.SASLAuthenticateResponse)
	if aresp.ErrorCode != kerr.IllegalSaslState.Code || aresp.ErrorMessage == nil || !strings.Contains(*aresp.ErrorMessage, "sasl.upstream") {
		t.Fatalf("SaslAuthenticate answered %d %v", aresp.ErrorCode, aresp.ErrorMessage)
	}
	if env.keys(17) != before {
		t.Fatal("the client's SaslHandshake reached the broker")
	}
	// The connection still serves.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	if _, ok := roundTripKmsg(t, c, md, 8).(*kmsg.MetadataResponse); !ok {
		t.Fatal("no Metadata answer after the refusals")
	}
}
