// Package oauthtest is an OAuth 2.0 authorization server for tests: it
// issues tokens with the client credentials grant (client_secret_basic or
// an RFC 7523 client assertion) and remembers them, so a test broker can
// check that a token it is sent was issued and has not expired.
package oauthtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Server is a running authorization server.
type Server struct {
	URL string // the token endpoint

	clientID, secret, assertion string

	lifetime atomic.Int64 // of the tokens issued, in nanoseconds
	down     atomic.Bool  // answer 503
	opaque   atomic.Bool  // issue non-JWT tokens
	fetches  atomic.Int64 // token requests, answered or not
	serial   atomic.Int64

	mu     sync.Mutex
	issued map[string]time.Time // token -> expiry
	forms  []url.Values         // each request's form
	auths  []string             // each request's Authorization header
}

// Options set the one client the server knows. Secret or Assertion (the
// client assertion it expects) authenticates it.
type Options struct {
	ClientID, Secret, Assertion string
	Lifetime                    time.Duration
}

// New serves the token endpoint until the test ends.
func New(t testing.TB, o Options) *Server {
	s := &Server{clientID: o.ClientID, secret: o.Secret, assertion: o.Assertion, issued: map[string]time.Time{}}
	s.lifetime.Store(int64(o.Lifetime))
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/oauth2/token"
	return s
}

// SetDown makes the endpoint answer 503 (true) or work (false).
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// SetOpaque makes the server issue opaque tokens (not JWTs).
func (s *Server) SetOpaque(opaque bool) { s.opaque.Store(opaque) }

// SetLifetime changes the lifetime of the tokens issued from now on.
func (s *Server) SetLifetime(d time.Duration) { s.lifetime.Store(int64(d)) }

// Fetches is how many token requests the server was sent.
func (s *Server) Fetches() int64 { return s.fetches.Load() }

// Expiry is when tok, a token this server issued, expires; ok is false
// for a token it never issued.
func (s *Server) Expiry(tok string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.issued[tok]
	return exp, ok
}

// Requests are the forms and Authorization headers of the requests so
// far, in order.
func (s *Server) Requests() ([]url.Values, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]url.Values(nil), s.forms...), append([]string(nil), s.auths...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.fetches.Add(1)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	s.mu.Lock()
	s.forms = append(s.forms, r.PostForm)
	s.auths = append(s.auths, r.Header.Get("Authorization"))
	s.mu.Unlock()
	if s.down.Load() {
		http.Error(w, "temporarily unavailable", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.PostForm.Get("grant_type") != "client_credentials" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "want a client_credentials POST")
		return
	}
	if !s.authenticated(r) {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	life := time.Duration(s.lifetime.Load())
	exp := time.Now().Add(life)
	n := s.serial.Add(1)
	tok := fmt.Sprintf("opaque-%d", n)
	if !s.opaque.Load() {
		enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
		tok = enc(map[string]string{"alg": "none", "typ": "JWT"}) + "." +
			enc(map[string]any{"sub": s.clientID, "iat": time.Now().Unix(), "exp": exp.Unix(), "jti": n}) + "."
	}
	s.mu.Lock()
	s.issued[tok] = exp
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(life.Seconds())})
}

// authenticated checks client_secret_basic, or the client assertion.
func (s *Server) authenticated(r *http.Request) bool {
	if s.assertion != "" {
		return r.PostForm.Get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" &&
			r.PostForm.Get("client_assertion") == s.assertion && r.PostForm.Get("client_id") == s.clientID
	}
	id, secret, ok := r.BasicAuth()
	id, _ = url.QueryUnescape(id)
	secret, _ = url.QueryUnescape(secret)
	return ok && id == s.clientID && secret == s.secret
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}
