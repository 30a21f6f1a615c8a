package sasl

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testJWT builds an unsecured JWT (alg none, as Kafka's unsecured
// validator takes) with subject sub and secretC in a claim, so a token
// leaking anywhere is caught by checkNoSecret.
func testJWT(t *testing.T, sub string) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	claims := map[string]any{"iat": 1700000000, "exp": 4100000000, "scope": secretC}
	if sub != "" {
		claims["sub"] = sub
	}
	return enc(map[string]string{"alg": "none"}) + "." + enc(claims) + "."
}

// stubBroker answers the authentication requests as a broker would and
// records what it was sent. authAnswers are the SaslAuthenticate answers,
// in order.
type stubBroker struct {
	mu          sync.Mutex
	reqs        []kmsg.Request
	authAnswers []*kmsg.SASLAuthenticateResponse
	apiKeys     []kmsg.ApiVersionsResponseApiKey
	mechs       []string
}

func newStubBroker(answers ...*kmsg.SASLAuthenticateResponse) *stubBroker {
	return &stubBroker{authAnswers: answers, mechs: []string{OAuthBearer, Plain, ScramSHA256}, apiKeys: []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 17, MinVersion: 0, MaxVersion: 1},
		{ApiKey: 36, MinVersion: 0, MaxVersion: 2},
	}}
}

func (s *stubBroker) rt(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.ApiKeys = s.apiKeys
		return resp, nil
	case *kmsg.SASLHandshakeRequest:
		resp := kmsg.NewPtrSASLHandshakeResponse()
		resp.SupportedMechanisms = s.mechs
		if !slices.Contains(s.mechs, r.Mechanism) {
			resp.ErrorCode = 33
		}
		return resp, nil
	case *kmsg.SASLAuthenticateRequest:
		if len(s.authAnswers) == 0 {
			return nil, errors.New("stub: no SaslAuthenticate answer left")
		}
		a := s.authAnswers[0]
		s.authAnswers = s.authAnswers[1:]
		return a, nil
	}
	return nil, fmt.Errorf("stub: unexpected %T", req)
}

func (s *stubBroker) authBytes() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, r := range s.reqs {
		if a, ok := r.(*kmsg.SASLAuthenticateRequest); ok {
			out = append(out, a.SASLAuthBytes)
		}
	}
	return out
}

func authOK(lifetimeMs int64) *kmsg.SASLAuthenticateResponse {
	r := kmsg.NewPtrSASLAuthenticateResponse()
	r.SessionLifetimeMillis = lifetimeMs
	return r
}

func TestOAuthBearerClientMessage(t *testing.T) {
	jwt := testJWT(t, "svc-orders")
	f := newFixture(t, OAuthBearer, "", jwt+"\n")
	b := newStubBroker(authOK(60000), authOK(60000))
	res, err := f.auth(b.rt, "b:9092", nil)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if res.Principal != "svc-orders" || res.Lifetime != time.Minute || res.AuthVersion != 2 {
		t.Errorf("result %+v, want principal svc-orders, lifetime 1m, v2", res)
	}
	// RFC 7628: gs2 header with no channel binding and no authzid, then
	// the bearer token between ^A separators, and a closing ^A.
	want := "n,,\x01auth=Bearer " + jwt + "\x01\x01"
	got := b.authBytes()
	if len(got) != 1 || string(got[0]) != want {
		t.Fatalf("SaslAuthenticate bytes %q, want one request with %q", got, want)
	}
	if v := b.reqs[0].GetVersion(); b.reqs[0].Key() != 18 || v != 0 {
		t.Errorf("first request key %d v%d, want ApiVersions v0", b.reqs[0].Key(), v)
	}
	if hs, ok := b.reqs[1].(*kmsg.SASLHandshakeRequest); !ok || hs.Version != 1 || hs.Mechanism != OAuthBearer {
		t.Errorf("second request %+v, want SaslHandshake v1 OAUTHBEARER", b.reqs[1])
	}

	// A new token (same subject) is read for the re-authentication.
	jwt2 := testJWT(t, "svc-orders") + "x"
	writeFile(t, f.dir, "token", jwt2)
	if _, err := f.auth(b.rt, "b:9092", &res); err != nil {
		t.Fatalf("re-authentication: %v", err)
	}
	if got := b.authBytes(); len(got) != 2 || !strings.Contains(string(got[1]), jwt2) {
		t.Errorf("re-authentication did not send the new token")
	}
	if _, ok := b.reqs[3].(*kmsg.SASLHandshakeRequest); !ok || len(b.reqs) != 5 {
		t.Errorf("re-authentication sent %d requests starting with %T, want SaslHandshake + SaslAuthenticate", len(b.reqs)-3, b.reqs[3])
	}

	// A token for another subject is refused before anything is sent.
	writeFile(t, f.dir, "token", testJWT(t, "svc-billing"))
	if _, err := f.auth(b.rt, "b:9092", &res); err == nil || !strings.Contains(err.Error(), "svc-billing") {
		t.Errorf("re-authentication as another subject: %v, want an error naming it", err)
	}
	if len(b.reqs) != 5 {
		t.Errorf("%d requests sent, want none more for a refused principal change", len(b.reqs)-5)
	}
}

// TestOAuthBearerServerError: the broker's JSON error challenge is
// answered with ^A, then it fails the authentication with its message.
func TestOAuthBearerServerError(t *testing.T) {
	f := newFixture(t, OAuthBearer, "", testJWT(t, "svc-a"))
	challenge := kmsg.NewPtrSASLAuthenticateResponse()
	challenge.SASLAuthBytes = []byte(`{"status":"invalid_token"}`)
	fail := kmsg.NewPtrSASLAuthenticateResponse()
	fail.ErrorCode = 58
	fail.ErrorMessage = kmsg.StringPtr(`{"status":"invalid_token"}`)
	b := newStubBroker(challenge, fail)
	_, err := f.auth(b.rt, "b:9092", nil)
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Code != 58 || ae.Message != `{"status":"invalid_token"}` {
		t.Fatalf("error %v, want an *AuthError 58 with the broker's message", err)
	}
	if got := b.authBytes(); len(got) != 2 || string(got[1]) != "\x01" {
		t.Errorf("SaslAuthenticate bytes %q, want the token then ^A", got)
	}
}

func TestJWTSubject(t *testing.T) {
	for _, tc := range []struct{ token, want string }{
		{testJWT(t, "svc-a"), "svc-a"},
		{testJWT(t, ""), ""},
		{"opaque-token", ""},
		{"a.b.c", ""},
		{"a." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":7}`)) + ".", ""},
		{"a." + base64.URLEncoding.EncodeToString([]byte(`{"sub":"padded-x"}`)) + ".sig", "padded-x"},
	} {
		if got := jwtSubject(tc.token); got != tc.want {
			t.Errorf("jwtSubject(%q) = %q, want %q", tc.token, got, tc.want)
		}
	}
	// An opaque token is sent as is, with no principal.
	f := newFixture(t, OAuthBearer, "", "opaque-"+secretC)
	b := newStubBroker(authOK(0))
	res, err := f.auth(b.rt, "b:9092", nil)
	if err != nil || res.Principal != "" {
		t.Fatalf("opaque token: %+v, %v; want no principal, no error", res, err)
	}
}

// TestSecretsRedacted: a broker (or mechanism) that echoes what it was
// sent does not get the secret into an error.
func TestSecretsRedacted(t *testing.T) {
	f := newFixture(t, Plain, "alice", secretA)
	fail := kmsg.NewPtrSASLAuthenticateResponse()
	fail.ErrorCode = 58
	fail.ErrorMessage = kmsg.StringPtr("bad password " + secretA + " for alice")
	b := newStubBroker(fail)
	_, err := f.auth(b.rt, "b:9092", nil)
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Message != "bad password [redacted] for alice" {
		t.Fatalf("error %v, want an *AuthError with the password redacted", err)
	}

	// franz-go's SCRAM quotes a malformed server-first message in its
	// error: one echoing the password is redacted too.
	f = newFixture(t, ScramSHA256, "alice", secretB)
	echo := kmsg.NewPtrSASLAuthenticateResponse()
	echo.SASLAuthBytes = []byte("x=" + secretB + ",s=c2FsdA==,i=4096")
	b = newStubBroker(echo)
	_, err = f.auth(b.rt, "b:9092", nil)
	if err == nil || !strings.Contains(err.Error(), "x=[redacted]") {
		t.Fatalf("error %v, want franz-go's SCRAM error with the password redacted", err)
	}
	if r := f.o.Ready(); r == nil || !strings.Contains(r.Error(), "[redacted]") {
		t.Errorf("Ready = %v, want the redacted reason", r)
	}
}

func TestAuthErrorNames(t *testing.T) {
	for _, tc := range []struct {
		code      int16
		msg, text string
	}{
		{58, "nope", "broker refused: SASL_AUTHENTICATION_FAILED (58): nope"},
		{34, "", "broker refused: ILLEGAL_SASL_STATE (34): "},
		{-7777, "", "broker refused: UNKNOWN_ERROR_CODE_-7777 (-7777)"},
	} {
		if got := authError(tc.code, tc.msg).Error(); !strings.HasPrefix(got, tc.text) {
			t.Errorf("authError(%d, %q) = %q, want it to start %q", tc.code, tc.msg, got, tc.text)
		}
	}
}

func TestVersionNegotiation(t *testing.T) {
	ours := kmsg.NewPtrSASLAuthenticateRequest().MaxVersion()
	for _, tc := range []struct {
		name    string
		keys    []kmsg.ApiVersionsResponseApiKey
		want    int16
		wantErr string
	}{
		{"v0 only", []kmsg.ApiVersionsResponseApiKey{{ApiKey: 17, MaxVersion: 1}, {ApiKey: 36, MaxVersion: 0}}, 0, ""},
		{"newer broker", []kmsg.ApiVersionsResponseApiKey{{ApiKey: 17, MaxVersion: 1}, {ApiKey: 36, MaxVersion: ours + 3}}, ours, ""},
		{"no SaslAuthenticate", []kmsg.ApiVersionsResponseApiKey{{ApiKey: 17, MaxVersion: 1}}, 0, "SaslAuthenticate"},
		{"handshake v0 only", []kmsg.ApiVersionsResponseApiKey{{ApiKey: 17, MaxVersion: 0}, {ApiKey: 36}}, 0, "SaslHandshake v1"},
		{"too new", []kmsg.ApiVersionsResponseApiKey{{ApiKey: 17, MaxVersion: 1}, {ApiKey: 36, MinVersion: ours + 1, MaxVersion: ours + 1}}, 0, "needs SaslAuthenticate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, OAuthBearer, "", testJWT(t, "s"))
			b := newStubBroker(authOK(5000))
			b.apiKeys = tc.keys
			res, err := f.auth(b.rt, "b:9092", nil)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr == "" && res.AuthVersion != tc.want:
				t.Errorf("AuthVersion %d, want %d", res.AuthVersion, tc.want)
			}
		})
	}
}

func TestLifetimeClamped(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{{0, 0}, {-5, 0}, {1500, 1500 * time.Millisecond}, {1 << 62, maxLifetime}} {
		if got := lifetimeOf(tc.ms); got != tc.want {
			t.Errorf("lifetimeOf(%d) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}
