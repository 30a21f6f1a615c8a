package sasl

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/oauthtest"
)

const oauthSecret = "cl13nt-S3cret-value"

// oauthFor is an oauth section for srv, its secret in a file.
func oauthFor(t *testing.T, srv *oauthtest.Server, secret string) OAuth {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return OAuth{TokenEndpoint: srv.URL, ClientID: "kafka-orders", ClientSecretFile: path, Scope: "kafka produce", Audience: "kafka-cluster"}
}

func newSource(t *testing.T, o OAuth) (*tokenSource, *Metrics, *logBuf) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry())
	logs := &logBuf{}
	s, err := newTokenSource(o, m, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s, m, logs
}

// A flood of authentications with no token yet costs one request to the
// authorization server: they all wait for the one fetch.
func TestTokenOneFetchForAFlood(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{ClientID: "kafka-orders", Secret: oauthSecret, Lifetime: time.Hour})
	s, m, _ := newSource(t, oauthFor(t, srv, oauthSecret))
	var wg sync.WaitGroup
	errs := make(chan error, 500)
	for range 500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := s.Token(context.Background())
			if err == nil {
				if _, ok := srv.Expiry(tok.value); !ok {
					err = fmt.Errorf("token %q was never issued", tok.value)
				}
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Fetches(); n != 1 {
		t.Fatalf("500 authentications made %d token requests, want 1", n)
	}
	if v := testutil.ToFloat64(m.tokenFetches[1]); v != 1 {
		t.Fatalf("kproxy_oauth_token_fetches_total{result=ok} = %v, want 1", v)
	}
	forms, auths := srv.Requests()
	if got := forms[0]; got.Get("scope") != "kafka produce" || got.Get("audience") != "kafka-cluster" || got.Get("client_secret") != "" {
		t.Fatalf("token request form %v: want the scope and audience, and the secret only in the Authorization header", got)
	}
	if !strings.HasPrefix(auths[0], "Basic ") {
		t.Fatalf("Authorization %q: want client_secret_basic", auths[0])
	}
}

// The refresher fetches the next token at refresh_at of the current one's
// lifetime, before it expires, and Token hands out the newest.
func TestTokenRefreshedBeforeExpiry(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{ClientID: "kafka-orders", Secret: oauthSecret, Lifetime: 2 * time.Second})
	o := oauthFor(t, srv, oauthSecret)
	o.RefreshAt = 0.5
	s, m, _ := newSource(t, o)
	s.start()
	first, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		cur, err := s.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if cur.value != first.value {
			if !time.Now().Before(first.expiry) && srv.Fetches() < 2 {
				t.Fatal("a new token came only after the first had expired")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new token 20 s after one of 2 s lifetime (fetches %d)", srv.Fetches())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if exp := testutil.ToFloat64(m.tokenExpiry); exp < float64(first.expiry.Unix()) {
		t.Fatalf("kproxy_oauth_token_expiry_timestamp_seconds = %v, want the newest token's expiry", exp)
	}
}

// An endpoint that fails: Token and Ready report why (no secret in it),
// repeated calls inside the backoff make no new request, and once the
// endpoint is back the refresher gets a token and the failure clears.
func TestTokenEndpointDownThenBack(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{ClientID: "kafka-orders", Secret: oauthSecret, Lifetime: time.Hour})
	srv.SetDown(true)
	s, m, logs := newSource(t, oauthFor(t, srv, oauthSecret))
	_, err := s.Token(context.Background())
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), srv.URL) {
		t.Fatalf("error %v: want the endpoint and its 503", err)
	}
	for range 20 {
		s.Token(context.Background())
	}
	if n := srv.Fetches(); n != 1 {
		t.Fatalf("%d requests to a failing endpoint within its backoff, want 1", n)
	}
	if s.failure() == nil {
		t.Fatal("no failure reported while the endpoint is down")
	}
	srv.SetDown(false)
	s.start()
	deadline := time.Now().Add(20 * time.Second)
	for s.failure() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still failing 20 s after the endpoint came back: %v", s.failure())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.Token(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(m.tokenFetches[0]); v < 1 {
		t.Fatal("the failed fetch was not counted")
	}
	checkNoLeak(t, logs.String())
}

// A wrong secret: the server's OAuth error is reported, the secret never.
func TestTokenWrongSecret(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{ClientID: "kafka-orders", Secret: oauthSecret, Lifetime: time.Hour})
	s, _, logs := newSource(t, oauthFor(t, srv, "wr0ng-"+oauthSecret))
	_, err := s.Token(context.Background())
	if err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("error %v: want the server's invalid_client", err)
	}
	checkNoLeak(t, err.Error()+logs.String())
}

// With client_assertion_file, the file's JWT goes as the RFC 7523 client
// assertion, read again at each fetch (a rotated ServiceAccount token
// applies from the next), with no client secret.
func TestTokenClientAssertion(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{ClientID: "kafka-orders", Assertion: "sa-token-2", Lifetime: time.Hour})
	path := filepath.Join(t.TempDir(), "token")
	os.WriteFile(path, []byte("sa-token-1"), 0o600)
	s, _, _ := newSource(t, OAuth{TokenEndpoint: srv.URL, ClientID: "kafka-orders", ClientAssertionFile: path})
	if _, err := s.fetch(context.Background()); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("an assertion the server does not take: %v", err)
	}
	os.WriteFile(path, []byte("sa-token-2\n"), 0o600)
	if _, err := s.fetch(context.Background()); err != nil {
		t.Fatalf("the rotated assertion: %v", err)
	}
	forms, auths := srv.Requests()
	if auths[1] != "" || forms[1].Get("client_secret") != "" || forms[1].Get("client_id") != "kafka-orders" {
		t.Fatalf("request %v with Authorization %q: want client_id and the assertion in the form, no secret", forms[1], auths[1])
	}
}

// With client_id_file, the client id is read from its file at each fetch.
func TestTokenClientIDFile(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{ClientID: "kafka-orders", Secret: oauthSecret, Lifetime: time.Hour})
	o := oauthFor(t, srv, oauthSecret)
	o.ClientID, o.ClientIDFile = "", filepath.Join(t.TempDir(), "client-id")
	os.WriteFile(o.ClientIDFile, []byte("kafka-orders\n"), 0o600)
	s, _, _ := newSource(t, o)
	if _, err := s.fetch(context.Background()); err != nil {
		t.Fatalf("client id from its file: %v", err)
	}
}

// Expiry: the server's expires_in when given, for opaque tokens too; the
// principal is a JWT's subject, none for an opaque token.
func TestTokenExpiryAndPrincipal(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{ClientID: "kafka-orders", Secret: oauthSecret, Lifetime: 90 * time.Second})
	s, _, _ := newSource(t, oauthFor(t, srv, oauthSecret))
	tok, err := s.fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tok.subject != "kafka-orders" || tok.lifetime < 80*time.Second || tok.lifetime > 91*time.Second {
		t.Fatalf("token subject %q, lifetime %v: want kafka-orders and about 90 s", tok.subject, tok.lifetime)
	}
	srv.SetOpaque(true)
	if tok, err = s.fetch(context.Background()); err != nil || tok.subject != "" || tok.lifetime < 80*time.Second {
		t.Fatalf("opaque token: %+v, %v: want no subject and the server's expires_in", tok, err)
	}
	if !jwtExpiry("a.b").IsZero() {
		t.Fatal("a non-JWT has an expiry")
	}
}

// checkNoLeak fails when text holds the client secret.
func checkNoLeak(t *testing.T, text string) {
	t.Helper()
	if strings.Contains(text, oauthSecret) {
		t.Fatalf("the client secret leaked:\n%s", text)
	}
}
