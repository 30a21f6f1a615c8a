package sasl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Originator authenticates kproxy's upstream connections with the
// configured mechanism and credentials. Its methods are safe for
// concurrent use, and a nil *Originator is origination off.
type Originator struct {
	u   Upstream
	m   *Metrics
	log zerolog.Logger
	// gate bounds the initial logins of upstream connections.
	gate *loginGate
	// failing is why the last authentication failed, or nil since one
	// worked (or none ran).
	failing atomic.Pointer[failure]
	// worked is when an authentication last worked (unix nanoseconds).
	worked atomic.Int64
	// tokens fetches OAUTHBEARER tokens (sasl.upstream.oauth); nil when
	// the credentials are files.
	tokens *tokenSource
}

type failure struct{ err error }

// Result is the outcome of one (re-)authentication.
type Result struct {
	// Principal is the username, or the JWT's "sub" claim (unverified,
	// informational: for logs and spans). "" for an opaque token.
	Principal string
	// Lifetime is SaslAuthenticate's session_lifetime_ms: the broker
	// closes the connection after it unless re-authenticated (see
	// ReauthAt). 0: no re-authentication needed.
	Lifetime time.Duration
	// AuthVersion is the SaslAuthenticate version used, reused for
	// re-authentication (which sends no ApiVersions).
	AuthVersion int16
}

// New returns the Originator for c, or nil, nil when c has no upstream
// section (origination off). It does not read the credential files: each
// authentication does, and Config.Check does at start.
func New(c Config, m *Metrics, log zerolog.Logger) (*Originator, error) {
	if c.Upstream == nil {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	o := &Originator{u: *c.Upstream, m: m, log: log, gate: newLoginGate(*c.Upstream, m, log)}
	if c.Upstream.OAuth != nil {
		ts, err := newTokenSource(*c.Upstream.OAuth, m, log)
		if err != nil {
			return nil, err
		}
		o.tokens = ts
		ts.start()
	}
	return o, nil
}

// Close stops fetching OAuth tokens; nothing else needs stopping.
func (o *Originator) Close() {
	if o != nil && o.tokens != nil {
		o.tokens.close()
	}
}

// On reports whether kproxy originates SASL.
func (o *Originator) On() bool { return o != nil }

// Mechanism is the configured mechanism name, "" when off.
func (o *Originator) Mechanism() string {
	if o == nil {
		return ""
	}
	return o.u.Mechanism
}

// Ready says why upstream authentication is failing, or nil: the last
// (initial or re-) authentication failed and none has worked since. The
// reason names the mechanism, the broker and the broker's message.
func (o *Originator) Ready() error {
	if o == nil {
		return nil
	}
	if o.tokens != nil {
		if err := o.tokens.failure(); err != nil {
			return fmt.Errorf("upstream SASL OAUTHBEARER: fetching a token failing: %w", err)
		}
	}
	if f := o.failing.Load(); f != nil {
		return f.err
	}
	return nil
}

// WorkedWithin reports whether an authentication worked in the last d and
// none failed since: a readiness check then need not log in itself.
func (o *Originator) WorkedWithin(d time.Duration) bool {
	if o == nil || o.failing.Load() != nil || (o.tokens != nil && o.tokens.failure() != nil) {
		return false
	}
	at := o.worked.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < d
}

// maxRounds bounds the SaslAuthenticate exchanges of one authentication
// (SCRAM needs two), against a broker that never lets a mechanism finish.
const maxRounds = 8

// maxLifetime clamps session_lifetime_ms, so a huge value cannot overflow
// a time.Duration into the past and force a re-authentication per request.
const maxLifetime = 365 * 24 * time.Hour

// Authenticate runs one authentication over rt, to the broker at host
// (host:port, passed to the mechanism).
//
// prev nil (a new connection): ApiVersions v0 picks the SaslAuthenticate
// version (the highest the broker and kmsg both know; v1 and up carry the
// session lifetime), then SaslHandshake v1 names the mechanism, then
// SaslAuthenticate rounds run until the mechanism is done.
//
// prev not nil (KIP-368 re-authentication of the connection prev
// authenticated): no ApiVersions, prev.AuthVersion again, and an error
// before anything is sent when prev.Lifetime is 0 (the broker refuses a
// second handshake then) or when the credentials now name another
// principal (the broker refuses a principal change).
//
// The credential files are read at each call. A broker refusal is an
// *AuthError (errors.As finds it). On error, the Result still names the
// principal the credentials name, when they could be read. No error
// carries a secret or a file's contents. Each call is counted, and its
// outcome is what Ready reports.
func (o *Originator) Authenticate(ctx context.Context, rt RoundTrip, host string, prev *Result) (Result, error) {
	if o == nil {
		return Result{}, errors.New("sasl: origination is off (no sasl.upstream)")
	}
	res, err := o.authenticate(ctx, rt, host, prev)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// Cut short because its connection ended (the relay cancels the
		// exchange then): it says nothing about the credentials, so it is
		// counted cancelled, not failed, and not held against the
		// backoff. A re-authentication on the session's timer can meet a
		// client closing its connection at any moment.
		o.m.cancelled(prev != nil)
		o.record(ctx, host, prev != nil, res, err)
		return res, err
	}
	o.m.count(prev != nil, err == nil)
	if prev == nil && o.gate != nil {
		o.gate.done(err) // initial logins, a readiness check's included, drive the backoff
	}
	o.record(ctx, host, prev != nil, res, err)
	return res, err
}

func (o *Originator) authenticate(ctx context.Context, rt RoundTrip, host string, prev *Result) (res Result, err error) {
	creds, err := o.credentials(ctx)
	if err != nil {
		return res, err
	}
	defer func() { err = redacted(err, creds.secrets()) }()
	res.Principal = creds.principal

	if prev != nil {
		switch {
		case prev.Lifetime <= 0:
			return res, errors.New("no re-authentication: the broker gave this session no lifetime (it refuses a second handshake then)")
		case prev.Principal != "" && creds.principal != "" && prev.Principal != creds.principal:
			return res, fmt.Errorf("the credentials now name principal %q, but the connection authenticated as %q, and the broker refuses a principal change on re-authentication: the connection must be opened again", creds.principal, prev.Principal)
		}
		res.AuthVersion = prev.AuthVersion
	} else if res.AuthVersion, err = authVersion(ctx, rt); err != nil {
		return res, err
	}

	if err := o.handshake(ctx, rt); err != nil {
		return res, err
	}
	lifetime, err := o.exchange(ctx, rt, host, creds, res.AuthVersion)
	if err != nil {
		return res, err
	}
	res.Lifetime = lifetimeOf(lifetime)
	return res, nil
}

// lifetimeOf turns session_lifetime_ms into a Duration: 0 for none (or a
// negative value), clamped to maxLifetime.
func lifetimeOf(ms int64) time.Duration {
	switch {
	case ms <= 0:
		return 0
	case ms > int64(maxLifetime/time.Millisecond):
		return maxLifetime
	}
	return time.Duration(ms) * time.Millisecond
}

// authVersion asks the broker's versions (ApiVersions v0, which every
// broker answers) and picks the SaslAuthenticate version to use.
func authVersion(ctx context.Context, rt RoundTrip) (int16, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	kr, err := rt(ctx, req)
	if err != nil {
		return 0, err
	}
	resp, ok := kr.(*kmsg.ApiVersionsResponse)
	if !ok {
		return 0, fmt.Errorf("ApiVersions: unexpected response %T", kr)
	}
	if resp.ErrorCode != 0 {
		return 0, &stepError{"ApiVersions", authError(resp.ErrorCode, "")}
	}
	var hs, auth *kmsg.ApiVersionsResponseApiKey
	for i := range resp.ApiKeys {
		switch k := &resp.ApiKeys[i]; k.ApiKey {
		case kmsg.SASLHandshake.Int16():
			hs = k
		case kmsg.SASLAuthenticate.Int16():
			auth = k
		}
	}
	ours := kmsg.NewPtrSASLAuthenticateRequest().MaxVersion()
	switch {
	case hs == nil || hs.MaxVersion < 1:
		return 0, errors.New("the broker does not offer SaslHandshake v1 (SASL needs Kafka 1.0 or later)")
	case auth == nil:
		return 0, errors.New("the broker does not offer SaslAuthenticate (SASL needs Kafka 1.0 or later)")
	case auth.MinVersion > ours:
		return 0, fmt.Errorf("the broker needs SaslAuthenticate v%d or later; kproxy knows up to v%d", auth.MinVersion, ours)
	}
	return min(auth.MaxVersion, ours), nil
}

// handshake names the mechanism (SaslHandshake v1: the tokens then travel
// in SaslAuthenticate requests).
func (o *Originator) handshake(ctx context.Context, rt RoundTrip) error {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = 1
	req.Mechanism = o.u.Mechanism
	kr, err := rt(ctx, req)
	if err != nil {
		return err
	}
	resp, ok := kr.(*kmsg.SASLHandshakeResponse)
	if !ok {
		return fmt.Errorf("SaslHandshake: unexpected response %T", kr)
	}
	if resp.ErrorCode != 0 {
		msg := ""
		if len(resp.SupportedMechanisms) > 0 {
			msg = "the broker offers " + strings.Join(resp.SupportedMechanisms, ", ")
		}
		return &stepError{"SaslHandshake " + o.u.Mechanism, authError(resp.ErrorCode, msg)}
	}
	return nil
}

// exchange runs the mechanism's SaslAuthenticate rounds and returns the
// session lifetime in milliseconds.
func (o *Originator) exchange(ctx context.Context, rt RoundTrip, host string, creds credentials, version int16) (int64, error) {
	session, write, err := o.mechanism(creds).Authenticate(ctx, host)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", o.u.Mechanism, err)
	}
	if len(write) == 0 {
		return 0, fmt.Errorf("%s: the mechanism has no first message", o.u.Mechanism)
	}
	var lifetime int64
	// A mechanism can be done and still have a last message to send;
	// every SaslAuthenticate request gets a response (KIP-152).
	for done, round := false, 1; !done || len(write) > 0; round++ {
		if round > maxRounds {
			return 0, fmt.Errorf("%s: not done after %d SaslAuthenticate rounds", o.u.Mechanism, maxRounds)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = version
		req.SASLAuthBytes = write
		kr, err := rt(ctx, req)
		if err != nil {
			return 0, err
		}
		resp, ok := kr.(*kmsg.SASLAuthenticateResponse)
		if !ok {
			return 0, fmt.Errorf("SaslAuthenticate: unexpected response %T", kr)
		}
		if resp.ErrorCode != 0 {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			return 0, &stepError{"SaslAuthenticate " + o.u.Mechanism, authError(resp.ErrorCode, msg)}
		}
		lifetime = resp.SessionLifetimeMillis
		write = nil
		if !done {
			if done, write, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return 0, fmt.Errorf("%s: %w", o.u.Mechanism, err)
			}
		}
	}
	return lifetime, nil
}

// mechanism is franz-go's client side of the configured mechanism, with
// this authentication's credentials.
func (o *Originator) mechanism(c credentials) kgosasl.Mechanism {
	switch o.u.Mechanism {
	case Plain:
		return plain.Auth{User: c.user, Pass: c.pass}.AsMechanism()
	case ScramSHA256:
		return scram.Auth{User: c.user, Pass: c.pass}.AsSha256Mechanism()
	case ScramSHA512:
		return scram.Auth{User: c.user, Pass: c.pass}.AsSha512Mechanism()
	default: // OAUTHBEARER: Validate allows nothing else.
		a := oauth.Auth{Token: c.token}
		if o.u.OAuth != nil {
			a.Extensions = o.u.OAuth.Extensions
		}
		return a.AsMechanism()
	}
}

// record keeps the outcome for Ready. A cancelled ctx (the client left
// during authentication) says nothing about the credentials and changes
// nothing.
func (o *Originator) record(ctx context.Context, host string, reauth bool, res Result, err error) {
	kind := KindInitial
	if reauth {
		kind = KindReauth
	}
	if err == nil {
		o.worked.Store(time.Now().UnixNano())
		if o.failing.Swap(nil) != nil {
			o.log.Info().Str("sasl_mechanism", o.u.Mechanism).Str("principal", res.Principal).Str("broker", host).
				Msg("upstream SASL authentication works again")
		}
		o.log.Debug().Str("sasl_mechanism", o.u.Mechanism).Str("kind", kind).Str("principal", res.Principal).
			Str("broker", host).Dur("session_lifetime", res.Lifetime).Msg("upstream SASL authenticated")
		return
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	o.failing.Store(&failure{fmt.Errorf("upstream SASL %s authentication (%s) to %s failing: %w", o.u.Mechanism, kind, host, err)})
}

// InBackoff reports whether logins keep failing and new ones are held
// back: a readiness check then reports the last failure instead of
// logging in itself.
func (o *Originator) InBackoff() bool { return o != nil && o.gate.inBackoff() }

// credentials are this authentication's: the files read now, or the
// current OAuth token.
func (o *Originator) credentials(ctx context.Context) (credentials, error) {
	if o.tokens != nil {
		t, err := o.tokens.Token(ctx)
		if err != nil {
			return credentials{}, fmt.Errorf("fetching an OAuth token: %w", err)
		}
		return credentials{token: t.value, principal: t.subject}, nil
	}
	creds, err := load(&o.u)
	if err != nil {
		return creds, fmt.Errorf("reading credentials: %w", err)
	}
	return creds, nil
}
