package sasl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Token fetching bounds.
const (
	// fetchTimeout bounds one request to the token endpoint.
	fetchTimeout = 15 * time.Second
	// Failed fetches are retried after a jittered backoff from
	// minFetchBackoff, doubling to maxFetchBackoff.
	minFetchBackoff = time.Second
	maxFetchBackoff = 30 * time.Second
	// unknownLifetime is the lifetime assumed of a token whose answer
	// gives no expires_in and which is no JWT with an exp claim.
	unknownLifetime = 5 * time.Minute
	// expirySkew: a token this close to its expiry is not handed out
	// (it would expire on the way to the broker).
	expirySkew = 5 * time.Second
	// assertionType is RFC 7523's client assertion type.
	assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// token is one token the endpoint issued.
type token struct {
	value    string
	issued   time.Time
	expiry   time.Time
	subject  string // the JWT's sub, "" when opaque
	lifetime time.Duration
}

// usable reports whether t may still be sent at now.
func (t *token) usable(now time.Time) bool {
	return t != nil && now.Before(t.expiry.Add(-min(expirySkew, t.lifetime/10)))
}

// tokenSource fetches OAUTHBEARER tokens with the client credentials
// grant (golang.org/x/oauth2/clientcredentials) and keeps the current one:
// every connection's (re-)authentication takes it, one fetch at a time
// serves them all, and a goroutine fetches the next at refresh_at of the
// current one's lifetime. Failures back off, and the last one is what
// Ready reports until a fetch works again.
type tokenSource struct {
	o      OAuth
	client *http.Client
	m      *Metrics
	log    zerolog.Logger
	now    func() time.Time

	mu      sync.Mutex
	cur     *token
	flight  chan struct{} // closed when the fetch under way ends
	failing error         // the last fetch's error, nil once one worked
	backoff time.Duration // the wait after the last failure
	nextTry time.Time     // no fetch on demand before it, after a failure
	// base is cancelled by close: fetches under way end with it.
	base     context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	started  atomic.Bool
	stopOnce sync.Once
}

func newTokenSource(o OAuth, m *Metrics, log zerolog.Logger) (*tokenSource, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pool, err := caPool(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("sasl.upstream.oauth.ca_file: %w", err)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	base, cancel := context.WithCancel(context.Background())
	return &tokenSource{o: o, client: &http.Client{Transport: tr, Timeout: fetchTimeout}, m: m, log: log, now: time.Now,
		base: base, cancel: cancel, done: make(chan struct{})}, nil
}

// start runs the refresher until close.
func (s *tokenSource) start() {
	s.started.Store(true)
	go s.refresh()
}

// close stops the refresher and any fetch under way, and waits for them.
func (s *tokenSource) close() {
	s.stopOnce.Do(func() {
		s.cancel()
		if s.started.Load() {
			<-s.done
		}
	})
}

// Token returns a token that may be sent now: the current one, or one
// fetched now when there is none (a fetch under way is waited for, not
// doubled). While fetches fail it returns the last failure at once,
// until the backoff allows another try.
func (s *tokenSource) Token(ctx context.Context) (*token, error) {
	for {
		s.mu.Lock()
		now := s.now()
		if s.cur.usable(now) {
			t := s.cur
			s.mu.Unlock()
			return t, nil
		}
		if s.flight != nil {
			wait := s.flight
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if s.failing != nil && now.Before(s.nextTry) {
			err := s.failing
			s.mu.Unlock()
			return nil, err
		}
		s.mu.Unlock()
		// The fetched token is handed out even if it is already close to
		// its expiry: looping for a better one would hammer a server that
		// issues short tokens.
		return s.fetchOnce(ctx)
	}
}

// failure is the last fetch's error while no fetch has worked since.
func (s *tokenSource) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failing
}

// fetchOnce fetches a token unless a fetch is already under way, in
// which case it waits for that one. Either way it returns the outcome.
func (s *tokenSource) fetchOnce(ctx context.Context) (*token, error) {
	s.mu.Lock()
	if s.flight != nil {
		wait := s.flight
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.failing != nil {
			return nil, s.failing
		}
		return s.cur, nil
	}
	s.flight = make(chan struct{})
	s.mu.Unlock()

	// The fetch is not the caller's to cancel: others may be waiting on it.
	fctx, cancel := context.WithTimeout(s.base, fetchTimeout)
	t, err := s.fetch(fctx)
	cancel()

	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.flight)
	s.flight = nil
	s.m.tokenFetched(err == nil, timeOf(t))
	if err != nil {
		s.backoff = min(max(2*s.backoff, minFetchBackoff), maxFetchBackoff)
		s.nextTry = s.now().Add(jitter(s.backoff))
		if s.failing == nil {
			s.log.Warn().Err(err).Str("token_endpoint", s.o.TokenEndpoint).Msg("OAuth token fetch failing; live sessions keep their token")
		}
		s.failing = err
		return nil, err
	}
	if s.failing != nil {
		s.log.Info().Str("token_endpoint", s.o.TokenEndpoint).Msg("OAuth token fetch works again")
	}
	s.cur, s.failing, s.backoff = t, nil, 0
	s.log.Debug().Str("principal", t.subject).Time("expiry", t.expiry).Msg("OAuth token fetched")
	return t, nil
}

func timeOf(t *token) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.expiry
}

// jitter spreads d over [d/2, d), so many kproxies do not retry in step.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// fetch makes one token request. Its errors name the endpoint and the
// server's answer, never the secret or the assertion.
func (s *tokenSource) fetch(ctx context.Context) (*token, error) {
	cfg := clientcredentials.Config{ClientID: s.o.ClientID, TokenURL: s.o.TokenEndpoint,
		Scopes: strings.Fields(s.o.Scope), EndpointParams: url.Values{}, AuthStyle: oauth2.AuthStyleInHeader}
	var secret string
	var err error
	if s.o.ClientIDFile != "" {
		if cfg.ClientID, err = readSecret(s.o.ClientIDFile); err != nil {
			return nil, fmt.Errorf("sasl.upstream.oauth.client_id_file: %w", err)
		}
	}
	if s.o.ClientSecretFile != "" {
		if secret, err = readSecret(s.o.ClientSecretFile); err != nil {
			return nil, fmt.Errorf("sasl.upstream.oauth.client_secret_file: %w", err)
		}
		cfg.ClientSecret = secret
	} else {
		if secret, err = readSecret(s.o.ClientAssertionFile); err != nil {
			return nil, fmt.Errorf("sasl.upstream.oauth.client_assertion_file: %w", err)
		}
		cfg.AuthStyle = oauth2.AuthStyleInParams // client_id in the form, no client_secret
		cfg.EndpointParams.Set("client_assertion_type", assertionType)
		cfg.EndpointParams.Set("client_assertion", secret)
	}
	if s.o.Audience != "" {
		cfg.EndpointParams.Set("audience", s.o.Audience)
	}
	start := s.now()
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, s.client))
	if err != nil {
		return nil, redacted(fmt.Errorf("token endpoint %s: %w", s.o.TokenEndpoint, describeFetchError(err)), []string{secret})
	}
	t := &token{value: tok.AccessToken, issued: start, subject: jwtSubject(tok.AccessToken)}
	switch exp := jwtExpiry(tok.AccessToken); {
	case !tok.Expiry.IsZero(): // expires_in: the server's word, opaque token or not
		t.expiry = tok.Expiry
	case !exp.IsZero():
		t.expiry = exp
	default:
		t.expiry = start.Add(unknownLifetime)
	}
	t.lifetime = t.expiry.Sub(start)
	if t.lifetime <= 0 {
		return nil, fmt.Errorf("token endpoint %s issued a token that has already expired (at %s)", s.o.TokenEndpoint, t.expiry.UTC().Format(time.RFC3339))
	}
	return t, nil
}

// describeFetchError keeps what the server said (its OAuth error code and
// description) and the transport's cause, without the response body
// x/oauth2 quotes, which a misbehaving server could fill with anything.
func describeFetchError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := "HTTP " + re.Response.Status
		if re.ErrorCode != "" {
			msg += ": " + re.ErrorCode
		}
		if re.ErrorDescription != "" {
			msg += " (" + re.ErrorDescription + ")"
		}
		return errors.New(msg)
	}
	return err
}

// refresh fetches the next token at refresh_at of the current one's
// lifetime, retrying failures with backoff, until close. It fetches the
// first at once, so the first client need not wait for it.
func (s *tokenSource) refresh() {
	defer close(s.done)
	for {
		s.mu.Lock()
		var wait time.Duration
		switch {
		case s.failing != nil:
			wait = max(s.nextTry.Sub(s.now()), 0)
		case s.cur != nil:
			at := s.cur.issued.Add(time.Duration(float64(s.cur.lifetime) * s.o.refreshAt()))
			wait = max(at.Sub(s.now()), 0)
		}
		s.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-s.base.Done():
			t.Stop()
			return
		case <-t.C:
		}
		s.fetchOnce(s.base)
	}
}

// jwtExpiry is a JWT's exp claim, unverified, or zero.
func jwtExpiry(tok string) time.Time {
	var claims struct {
		Exp float64 `json:"exp"`
	}
	if !jwtClaims(tok, &claims) || claims.Exp <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(claims.Exp * 1000))
}

// caPool reads the PEM roots trusted for the token endpoint.
func caPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
