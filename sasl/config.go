package sasl

import (
	"fmt"
	"strings"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// Mechanism names accepted in `sasl.upstream.mechanism`, as Kafka spells
// them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// Config is the `sasl:` section of kproxy.yaml.
type Config struct {
	// Upstream makes kproxy authenticate each broker connection itself
	// (SASL origination), so the application connects with no
	// credentials. nil (the section left out): no origination; a
	// client's own SASL passes through to the broker as before.
	Upstream *Upstream `yaml:"upstream"`
}

// Upstream is `sasl.upstream`: the credentials kproxy authenticates with.
// They are files (a mounted Kubernetes Secret) rather than values, so no
// secret sits in kproxy.yaml, and they are read again at every
// authentication and re-authentication: a rotated Secret applies from the
// next one, with no restart. Trailing line breaks in a file are ignored (a
// Secret made from `echo` output has one).
type Upstream struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER.
	// Required.
	Mechanism string `yaml:"mechanism"`
	// UsernameFile and PasswordFile hold the username and the password,
	// for PLAIN and the SCRAM mechanisms (both required there, not used
	// with OAUTHBEARER). The username is the principal kproxy's logs and
	// spans name.
	UsernameFile string `yaml:"username_file"`
	PasswordFile string `yaml:"password_file"`
	// TokenFile holds the bearer token (a JWT) for OAUTHBEARER: required
	// there, not used with the others. Whatever refreshes the token
	// (a sidecar, a projected token volume) replaces the file before it
	// expires; kproxy sends the token in the file at each
	// (re-)authentication. The token's "sub" claim, read without
	// verifying the signature, is the principal kproxy's logs and spans
	// name; an opaque (non-JWT) token is sent as is, with no principal
	// known.
	TokenFile string `yaml:"token_file"`
	// OAuth, instead of TokenFile, makes kproxy fetch and refresh the
	// token itself from an authorization server (see OAuth).
	OAuth *OAuth `yaml:"oauth"`
	// MaxLoginsPerSecond bounds the logins kproxy makes at the brokers,
	// all upstream connections together (0: 20 a second). A flood of
	// client connections waits for its turn rather than loading the
	// broker or the identity provider; one that waits past dial_timeout
	// + read_timeout is reset, like a client of an unreachable broker.
	MaxLoginsPerSecond float64 `yaml:"max_logins_per_second"`
	// MaxConcurrentLogins bounds the logins under way at once (0: 4).
	MaxConcurrentLogins int `yaml:"max_concurrent_logins"`
}

// Login bounds used when max_logins_per_second and max_concurrent_logins
// are 0.
const (
	defaultLoginsPerSecond   = 20
	defaultConcurrentLogins  = 4
	maxLoginsPerSecondBound  = 10000
	maxConcurrentLoginsBound = 1024
)

// Defaults returns the section as used when kproxy.yaml leaves it out: no
// origination.
func Defaults() Config { return Config{} }

// Validate reports the first invalid field, naming it relative to the
// section ("upstream.mechanism"). It does not open the files: Check does.
func (c Config) Validate() error {
	u := c.Upstream
	if u == nil {
		return nil
	}
	switch {
	case u.MaxLoginsPerSecond < 0 || u.MaxLoginsPerSecond > maxLoginsPerSecondBound:
		return fielderr.New("upstream.max_logins_per_second", fmt.Sprintf("must be 0 (the default, %d) or up to %d", defaultLoginsPerSecond, maxLoginsPerSecondBound))
	case u.MaxConcurrentLogins < 0 || u.MaxConcurrentLogins > maxConcurrentLoginsBound:
		return fielderr.New("upstream.max_concurrent_logins", fmt.Sprintf("must be 0 (the default, %d) or up to %d", defaultConcurrentLogins, maxConcurrentLoginsBound))
	}
	switch u.Mechanism {
	case Plain, ScramSHA256, ScramSHA512:
		switch {
		case u.UsernameFile == "":
			return fielderr.New("upstream.username_file", "is required with mechanism "+u.Mechanism)
		case u.PasswordFile == "":
			return fielderr.New("upstream.password_file", "is required with mechanism "+u.Mechanism)
		case u.TokenFile != "":
			return fielderr.New("upstream.token_file", "is for OAUTHBEARER only; mechanism "+u.Mechanism+" uses username_file and password_file")
		case u.OAuth != nil:
			return fielderr.New("upstream.oauth", "is for OAUTHBEARER only; mechanism "+u.Mechanism+" uses username_file and password_file")
		case u.UsernameFile == u.PasswordFile:
			return fielderr.New("upstream.password_file", "is the same file as username_file")
		}
	case OAuthBearer:
		switch {
		case u.TokenFile == "" && u.OAuth == nil:
			return fielderr.New("upstream.token_file", "or upstream.oauth is required with mechanism OAUTHBEARER")
		case u.TokenFile != "" && u.OAuth != nil:
			return fielderr.New("upstream.oauth", "and token_file are two sources of the token: set one")
		case u.OAuth != nil:
			if err := u.OAuth.validate(); err != nil {
				return err
			}
		case u.UsernameFile != "":
			return fielderr.New("upstream.username_file", "is not used with OAUTHBEARER (the principal is the token's subject); remove it")
		case u.PasswordFile != "":
			return fielderr.New("upstream.password_file", "is not used with OAUTHBEARER; remove it")
		}
	case "":
		return fielderr.New("upstream.mechanism", "is required: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	default:
		msg := "must be PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER, not " + u.Mechanism
		if up := strings.ToUpper(u.Mechanism); up != u.Mechanism && known(up) {
			msg += " (mechanism names are upper case: " + up + ")"
		}
		return fielderr.New("upstream.mechanism", msg)
	}
	return nil
}

func known(m string) bool {
	switch m {
	case Plain, ScramSHA256, ScramSHA512, OAuthBearer:
		return true
	}
	return false
}

// files lists the credential files the mechanism reads, by field.
func (u *Upstream) files() []fileField {
	if u.Mechanism == OAuthBearer {
		if o := u.OAuth; o != nil {
			var fs []fileField
			if o.ClientIDFile != "" {
				fs = append(fs, fileField{"upstream.oauth.client_id_file", o.ClientIDFile})
			}
			if o.ClientSecretFile != "" {
				return append(fs, fileField{"upstream.oauth.client_secret_file", o.ClientSecretFile})
			}
			return append(fs, fileField{"upstream.oauth.client_assertion_file", o.ClientAssertionFile})
		}
		return []fileField{{"upstream.token_file", u.TokenFile}}
	}
	return []fileField{{"upstream.username_file", u.UsernameFile}, {"upstream.password_file", u.PasswordFile}}
}

type fileField struct{ field, path string }
