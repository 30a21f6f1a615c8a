package sasl

import (
	"fmt"
	"net/url"
	"regexp"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// OAuth is `sasl.upstream.oauth`: kproxy fetches the OAUTHBEARER token
// itself from an OAuth 2.0 authorization server with the client
// credentials grant, and fetches the next before it expires, so no other
// sidecar has to keep a token file fresh.
type OAuth struct {
	// TokenEndpoint is the authorization server's token URL. Required.
	TokenEndpoint string `yaml:"token_endpoint"`
	// ClientID is the OAuth client. It or ClientIDFile is required.
	ClientID string `yaml:"client_id"`
	// ClientIDFile holds the client id instead, read at each fetch: for
	// a Secret that holds the client id beside its secret.
	ClientIDFile string `yaml:"client_id_file"`
	// ClientSecretFile holds the client secret, sent as
	// client_secret_basic. One of it and ClientAssertionFile.
	ClientSecretFile string `yaml:"client_secret_file"`
	// ClientAssertionFile holds a JWT sent as the client assertion
	// (RFC 7523), such as the pod's projected ServiceAccount token; it is
	// read at each fetch, so a rotated token applies from the next.
	ClientAssertionFile string `yaml:"client_assertion_file"`
	// Scope is the space-separated scope asked for; "" asks for none.
	Scope string `yaml:"scope"`
	// Audience, when set, is sent as the audience parameter (Auth0,
	// Keycloak and Azure read it).
	Audience string `yaml:"audience"`
	// CAFile holds the PEM roots trusted for the token endpoint; ""
	// trusts the system's.
	CAFile string `yaml:"ca_file"`
	// Extensions are SASL extensions sent with the token (RFC 7628),
	// such as Confluent Cloud's logicalCluster and identityPoolId.
	Extensions map[string]string `yaml:"extensions"`
	// RefreshAt is the fraction of a token's lifetime after which the
	// next is fetched; 0 means 0.8.
	RefreshAt float64 `yaml:"refresh_at"`
}

// defaultRefreshAt is refresh_at when it is 0.
const defaultRefreshAt = 0.8

// extensionKey is RFC 7628's key grammar: letters only; "auth" is the
// token's own key.
var extensionKey = regexp.MustCompile(`^[A-Za-z]+$`)

// extensionValue is RFC 7628's value grammar: visible ASCII, space, tab,
// CR and LF, none of the separator 0x01.
var extensionValue = regexp.MustCompile(`^[\x21-\x7E \t\r\n]*$`)

func (o *OAuth) validate() error {
	u, err := url.Parse(o.TokenEndpoint)
	switch {
	case o.TokenEndpoint == "":
		return fielderr.New("upstream.oauth.token_endpoint", "is required")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return fielderr.New("upstream.oauth.token_endpoint", "must be an http(s) URL")
	case o.ClientID == "" && o.ClientIDFile == "":
		return fielderr.New("upstream.oauth.client_id", "or client_id_file is required")
	case o.ClientID != "" && o.ClientIDFile != "":
		return fielderr.New("upstream.oauth.client_id_file", "and client_id are two sources of the client id: set one")
	case o.ClientSecretFile == "" && o.ClientAssertionFile == "":
		return fielderr.New("upstream.oauth.client_secret_file", "or client_assertion_file is required")
	case o.ClientSecretFile != "" && o.ClientAssertionFile != "":
		return fielderr.New("upstream.oauth.client_assertion_file", "and client_secret_file are two ways to authenticate the client: set one")
	case o.RefreshAt < 0 || o.RefreshAt >= 1:
		return fielderr.New("upstream.oauth.refresh_at", "must be above 0 and below 1 (0: the default, 0.8)")
	}
	for k, v := range o.Extensions {
		switch {
		case k == "auth" || !extensionKey.MatchString(k):
			return fielderr.New("upstream.oauth.extensions", fmt.Sprintf("key %q: a SASL extension key is letters only, and not auth (RFC 7628)", k))
		case !extensionValue.MatchString(v):
			return fielderr.New("upstream.oauth.extensions", fmt.Sprintf("value of %s: printable ASCII only (RFC 7628)", k))
		}
	}
	return nil
}

// refreshAt is RefreshAt with its default.
func (o *OAuth) refreshAt() float64 {
	if o.RefreshAt == 0 {
		return defaultRefreshAt
	}
	return o.RefreshAt
}
