package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/embedded"
	"github.com/kproxy/kproxy/internal/oauthtest"
	"github.com/kproxy/kproxy/sasl"
)

const oauthClientSecret = "0auth-Cl1ent-S3cret"

// oauthBroker is kfake taking OAUTHBEARER as a broker with an OAuth
// validator does: kfake has no OAUTHBEARER of its own, so SaslHandshake
// and SaslAuthenticate are answered here, taking only tokens the
// authorization server issued and that have not expired, with a session
// lifetime that ends at the token's expiry (as Kafka bounds it). It
// records each token and the extensions sent with it.
type oauthBroker struct {
	idp *oauthtest.Server

	mu       sync.Mutex
	tokens   []string
	exts     []string
	refusals int
}

func (b *oauthBroker) install(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.SASLHandshake), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.SASLHandshakeRequest)
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{sasl.OAuthBearer}
		if req.Mechanism != sasl.OAuthBearer {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		return resp, nil, true
	})
	c.ControlKey(int16(kmsg.SASLAuthenticate), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.SASLAuthenticateRequest)
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		tok, ext := parseOAuthBearer(req.SASLAuthBytes)
		exp, issued := b.idp.Expiry(tok)
		b.mu.Lock()
		defer b.mu.Unlock()
		if !issued || !time.Now().Before(exp) {
			b.refusals++
			msg := "token not issued by the authorization server, or expired"
			resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, &msg
			return resp, nil, true
		}
		b.tokens = append(b.tokens, tok)
		b.exts = append(b.exts, ext)
		resp.SessionLifetimeMillis = time.Until(exp).Milliseconds()
		return resp, nil, true
	})
}

// parseOAuthBearer reads RFC 7628's client first message: the bearer
// token, and the extensions as "k=v" joined by commas.
func parseOAuthBearer(b []byte) (tok, ext string) {
	var exts []string
	for _, kv := range bytes.Split(b, []byte{1}) {
		switch s := string(kv); {
		case strings.HasPrefix(s, "auth=Bearer "):
			tok = strings.TrimPrefix(s, "auth=Bearer ")
		case strings.Contains(s, "=") && !strings.HasPrefix(s, "n,"):
			exts = append(exts, s)
		}
	}
	return tok, strings.Join(exts, ",")
}

func (b *oauthBroker) seen() (tokens []string, exts []string, refusals int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.tokens...), append([]string(nil), b.exts...), b.refusals
}

// oauthEnv is kproxy with sasl.upstream.oauth in front of oauthBroker.
type oauthEnv struct {
	*testEnv
	idp    *oauthtest.Server
	broker *oauthBroker
	orig   *sasl.Originator
	reg    *prometheus.Registry
	logs   *logBuffer
	dir    string // the client secret's
}

func startOAuth(t *testing.T, lifetime time.Duration, refreshAt float64) *oauthEnv {
	t.Helper()
	idp := oauthtest.New(t, oauthtest.Options{ClientID: "kafka-orders", Secret: oauthClientSecret, Lifetime: lifetime})
	dir := t.TempDir()
	writeSecret(t, dir, "client-secret", oauthClientSecret)
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	orig, err := sasl.New(sasl.Config{Upstream: &sasl.Upstream{Mechanism: sasl.OAuthBearer,
		MaxLoginsPerSecond: 10000, MaxConcurrentLogins: 64,
		OAuth: &sasl.OAuth{TokenEndpoint: idp.URL, ClientID: "kafka-orders", ClientSecretFile: filepath.Join(dir, "client-secret"),
			Extensions: map[string]string{"logicalCluster": "lkc-orders"}, RefreshAt: refreshAt}}},
		sasl.NewMetrics(reg), zerolog.New(logs).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(orig.Close)
	broker := &oauthBroker{idp: idp}
	b, err := embedded.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	env := startProxyWith(t, b.Addr(), nil, func(s *Server) { s.SetSasl(orig) })
	c, err := b.Start(env.addr, kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	broker.install(c)
	env.cluster = c
	return &oauthEnv{testEnv: env, idp: idp, broker: broker, orig: orig, reg: reg, logs: logs, dir: dir}
}

// checkNoSecret fails when the client secret is in any of kproxy's
// output the test can see: its logs, the originator's, its metrics.
func (e *oauthEnv) checkNoSecret(t *testing.T, more ...string) {
	t.Helper()
	mfs, _ := e.reg.Gather()
	var metrics strings.Builder
	for _, mf := range mfs {
		metrics.WriteString(mf.String())
	}
	for _, text := range append(more, e.logs.String(), e.testEnv.logs.String(), metrics.String()) {
		if strings.Contains(text, oauthClientSecret) {
			t.Fatalf("the client secret leaked:\n%s", text)
		}
	}
}

// Tokens of 3 s, refreshed at half their life: a producer sending for
// three lifetimes through one kproxy connection sees no error and no
// reconnect, while kproxy re-authenticates the connection with each new
// token before the broker's session (bound by the token) ends.
func TestOAuthTokensRefreshedUnderLiveConnections(t *testing.T) {
	env := startOAuth(t, 3*time.Second, 0.5)
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.DefaultProduceTopic("orders"), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	conns := testutil.ToFloat64(env.m.Accepted)
	for end := time.Now().Add(9 * time.Second); time.Now().Before(end); {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce across token refreshes: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := testutil.ToFloat64(env.m.Accepted); got != conns {
		t.Fatalf("%v client connections after the refreshes, %v before: the client reconnected", got, conns)
	}
	tokens, exts, refusals := env.broker.seen()
	distinct := map[string]bool{}
	for _, tok := range tokens {
		distinct[tok] = true
	}
	if len(distinct) < 3 || refusals != 0 {
		t.Fatalf("the broker took %d distinct tokens in %d authentications and refused %d: want 3 lifetimes' tokens and no refusal", len(distinct), len(tokens), refusals)
	}
	if reauths := saslAuths(env.reg, sasl.KindReauth, sasl.ResultOK); reauths < 2 {
		t.Fatalf("%v re-authentications in three token lifetimes, want at least 2", reauths)
	}
	if exts[0] != "logicalCluster=lkc-orders" {
		t.Fatalf("extensions sent %q, want logicalCluster=lkc-orders", exts[0])
	}
	if n := env.idp.Fetches(); n > int64(len(distinct))+1 {
		t.Fatalf("%d token requests for %d tokens: connections fetch their own", n, len(distinct))
	}
	env.checkNoSecret(t)
}

// 500 client connections at once, each logged in to the broker by
// kproxy, cost the authorization server no request beyond the first
// token's.
func TestOAuthFloodCostsOneFetch(t *testing.T) {
	env := startOAuth(t, time.Hour, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 500)
	for i := range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- apiVersionsThrough(env.addr, int32(i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	tokens, _, _ := env.broker.seen()
	if len(tokens) < 500 {
		t.Fatalf("the broker saw %d logins for 500 connections", len(tokens))
	}
	if n := env.idp.Fetches(); n != 1 {
		t.Fatalf("500 connections made %d token requests, want 1", n)
	}
}

// apiVersionsThrough opens a connection to addr and reads one ApiVersions
// answer through it.
func apiVersionsThrough(addr string, id int32) error {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("flood")).AppendRequest(nil, req, id)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	_, err = io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:])))
	return err
}

// A token endpoint that goes down: readiness says so, naming the
// endpoint and never the secret, while the current token still serves
// new connections; once it is back, readiness recovers. A wrong secret
// is reported the same way.
func TestOAuthEndpointDownThenBack(t *testing.T) {
	env := startOAuth(t, 4*time.Second, 0.25)
	if err := apiVersionsThrough(env.addr, 1); err != nil {
		t.Fatal(err)
	}
	env.idp.SetDown(true)
	var notReady error
	waitFor(t, 20*time.Second, "readiness to report the failing token endpoint", func() bool {
		notReady = env.srv.Ready(context.Background())
		return notReady != nil && strings.Contains(notReady.Error(), env.idp.URL)
	})
	if err := apiVersionsThrough(env.addr, 2); err != nil {
		t.Fatalf("a new connection while the endpoint is down but the token is still good: %v", err)
	}
	env.idp.SetDown(false)
	waitFor(t, 30*time.Second, "readiness once the token endpoint is back", func() bool {
		return env.srv.Ready(context.Background()) == nil
	})
	env.checkNoSecret(t, notReady.Error())

	// The secret rotated at the server but not in kproxy's file.
	writeSecret(t, env.dir, "client-secret", "stale-"+oauthClientSecret)
	waitFor(t, 30*time.Second, "readiness to report invalid_client", func() bool {
		err := env.srv.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), "invalid_client")
	})
	if err := env.srv.Ready(context.Background()); err != nil {
		env.checkNoSecret(t, err.Error())
	}
}

// With the endpoint down and the last token expired, a new client is
// reset as a client of an unreachable broker is, and served again once a
// token can be fetched.
func TestOAuthNoTokenResetsNewClients(t *testing.T) {
	env := startOAuth(t, 2*time.Second, 0.5)
	if err := apiVersionsThrough(env.addr, 1); err != nil {
		t.Fatal(err)
	}
	env.idp.SetDown(true)
	time.Sleep(2500 * time.Millisecond) // past the token's expiry
	if err := apiVersionsThrough(env.addr, 2); err == nil {
		t.Fatal("a new client was served with no valid token to log in with")
	}
	env.idp.SetDown(false)
	waitFor(t, 40*time.Second, "a new client served once the endpoint is back", func() bool {
		return apiVersionsThrough(env.addr, 3) == nil
	})
	env.checkNoSecret(t)
}
