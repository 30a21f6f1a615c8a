package sasl

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/internal/fielderr"
	"gopkg.in/yaml.v3"
)

func TestValidate(t *testing.T) {
	up := func(u Upstream) Config { return Config{Upstream: &u} }
	for _, tc := range []struct {
		c     Config
		field string
		msg   string
	}{
		{Defaults(), "", ""},
		{up(Upstream{Mechanism: Plain, UsernameFile: "u", PasswordFile: "p"}), "", ""},
		{up(Upstream{Mechanism: ScramSHA256, UsernameFile: "u", PasswordFile: "p"}), "", ""},
		{up(Upstream{Mechanism: ScramSHA512, UsernameFile: "u", PasswordFile: "p"}), "", ""},
		{up(Upstream{Mechanism: OAuthBearer, TokenFile: "t"}), "", ""},
		{up(Upstream{}), "upstream.mechanism", "is required"},
		{up(Upstream{Mechanism: "GSSAPI", UsernameFile: "u", PasswordFile: "p"}), "upstream.mechanism", "not GSSAPI"},
		{up(Upstream{Mechanism: "scram-sha-512", UsernameFile: "u", PasswordFile: "p"}), "upstream.mechanism", "upper case: SCRAM-SHA-512"},
		{up(Upstream{Mechanism: Plain, PasswordFile: "p"}), "upstream.username_file", "required with mechanism PLAIN"},
		{up(Upstream{Mechanism: ScramSHA512, UsernameFile: "u"}), "upstream.password_file", "required with mechanism SCRAM-SHA-512"},
		{up(Upstream{Mechanism: ScramSHA256, UsernameFile: "u", PasswordFile: "p", TokenFile: "t"}), "upstream.token_file", "OAUTHBEARER only"},
		{up(Upstream{Mechanism: OAuthBearer}), "upstream.token_file", "required"},
		{up(Upstream{Mechanism: Plain, UsernameFile: "p", PasswordFile: "p"}), "upstream.password_file", "same file"},
		{up(Upstream{Mechanism: OAuthBearer, TokenFile: "t", UsernameFile: "u"}), "upstream.username_file", "not used"},
		{up(Upstream{Mechanism: OAuthBearer, TokenFile: "t", PasswordFile: "p"}), "upstream.password_file", "not used"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientID: "c", ClientSecretFile: "s"}}), "", ""},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientID: "c", ClientAssertionFile: "a",
			Extensions: map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}, RefreshAt: 0.5}}), "", ""},
		{up(Upstream{Mechanism: OAuthBearer, TokenFile: "t", OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientID: "c", ClientSecretFile: "s"}}), "upstream.oauth", "set one"},
		{up(Upstream{Mechanism: ScramSHA512, UsernameFile: "u", PasswordFile: "p", OAuth: &OAuth{}}), "upstream.oauth", "OAUTHBEARER only"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{ClientID: "c", ClientSecretFile: "s"}}), "upstream.oauth.token_endpoint", "required"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "idp:443", ClientID: "c", ClientSecretFile: "s"}}), "upstream.oauth.token_endpoint", "http(s) URL"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientSecretFile: "s"}}), "upstream.oauth.client_id", "required"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientIDFile: "i", ClientSecretFile: "s"}}), "", ""},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientID: "c", ClientIDFile: "i", ClientSecretFile: "s"}}), "upstream.oauth.client_id_file", "set one"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientID: "c"}}), "upstream.oauth.client_secret_file", "client_assertion_file is required"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientID: "c", ClientSecretFile: "s", ClientAssertionFile: "a"}}), "upstream.oauth.client_assertion_file", "set one"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientID: "c", ClientSecretFile: "s", RefreshAt: 1}}), "upstream.oauth.refresh_at", "below 1"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientID: "c", ClientSecretFile: "s", Extensions: map[string]string{"auth": "x"}}}), "upstream.oauth.extensions", "not auth"},
		{up(Upstream{Mechanism: OAuthBearer, OAuth: &OAuth{TokenEndpoint: "https://idp/token", ClientID: "c", ClientSecretFile: "s", Extensions: map[string]string{"pool": "a\x01b"}}}), "upstream.oauth.extensions", "printable"},
	} {
		err := tc.c.Validate()
		var fe *fielderr.Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v, want valid", tc.c.Upstream, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg)):
			t.Errorf("%+v: %v, want an error on %s saying %q", tc.c.Upstream, err, tc.field, tc.msg)
		}
	}
}

// TestYAMLNames pins the configuration names the issue gives.
func TestYAMLNames(t *testing.T) {
	var c Config
	src := `
upstream:
  mechanism: SCRAM-SHA-512
  username_file: /etc/kproxy/sasl/username
  password_file: /etc/kproxy/sasl/password
  token_file: /etc/kproxy/sasl/token
`
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	want := Upstream{Mechanism: ScramSHA512, UsernameFile: "/etc/kproxy/sasl/username",
		PasswordFile: "/etc/kproxy/sasl/password", TokenFile: "/etc/kproxy/sasl/token"}
	if c.Upstream == nil || *c.Upstream != want {
		t.Errorf("decoded %+v, want %+v", c.Upstream, want)
	}
}

// TestOAuthYAMLNames pins sasl.upstream.oauth's names, as the issue
// gives them.
func TestOAuthYAMLNames(t *testing.T) {
	var c Config
	src := `
upstream:
  mechanism: OAUTHBEARER
  oauth:
    token_endpoint: https://idp.example/oauth2/token
    client_id: kafka-orders
    client_secret_file: /etc/kproxy/oauth/client-secret
    client_assertion_file: /var/run/secrets/tokens/kafka
    scope: kafka
    audience: kafka-cluster
    ca_file: /etc/kproxy/oauth/ca.crt
    extensions: {logicalCluster: lkc-1}
    refresh_at: 0.7
`
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	o := c.Upstream.OAuth
	if o == nil || o.TokenEndpoint != "https://idp.example/oauth2/token" || o.ClientID != "kafka-orders" ||
		o.ClientSecretFile != "/etc/kproxy/oauth/client-secret" || o.ClientAssertionFile != "/var/run/secrets/tokens/kafka" ||
		o.Scope != "kafka" || o.Audience != "kafka-cluster" || o.CAFile != "/etc/kproxy/oauth/ca.crt" ||
		o.Extensions["logicalCluster"] != "lkc-1" || o.RefreshAt != 0.7 {
		t.Errorf("decoded %+v", o)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	user := writeFile(t, dir, "username", "alice\n")
	pass := writeFile(t, dir, "password", secretA)
	token := writeFile(t, dir, "token", testJWT(t, "svc"))
	empty := writeFile(t, dir, "empty", "\r\n")
	big := writeFile(t, dir, "big", strings.Repeat(secretB, maxSecretBytes/len(secretB)+1))
	missing := filepath.Join(dir, "missing")
	passAsUser := writeFile(t, dir, "user-is-pass", secretA+"\n")
	up := func(u Upstream) Config { return Config{Upstream: &u} }
	for _, tc := range []struct {
		c     Config
		field string
		msg   string
	}{
		{Defaults(), "", ""},
		{up(Upstream{Mechanism: Plain, UsernameFile: user, PasswordFile: pass}), "", ""},
		{up(Upstream{Mechanism: OAuthBearer, TokenFile: token}), "", ""},
		{up(Upstream{Mechanism: Plain, UsernameFile: missing, PasswordFile: pass}), "upstream.username_file", "no such file"},
		{up(Upstream{Mechanism: ScramSHA256, UsernameFile: user, PasswordFile: empty}), "upstream.password_file", "is empty"},
		{up(Upstream{Mechanism: ScramSHA256, UsernameFile: user, PasswordFile: dir}), "upstream.password_file", "is a directory"},
		{up(Upstream{Mechanism: ScramSHA512, UsernameFile: user, PasswordFile: big}), "upstream.password_file", "larger than 1 MiB"},
		{up(Upstream{Mechanism: OAuthBearer, TokenFile: missing}), "upstream.token_file", "no such file"},
		{up(Upstream{Mechanism: Plain, UsernameFile: passAsUser, PasswordFile: pass}), "upstream.password_file", "same value"},
	} {
		err := tc.c.Check()
		var fe *fielderr.Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v, want no error", tc.c.Upstream, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg)):
			t.Errorf("%+v: %v, want an error on %s saying %q", tc.c.Upstream, err, tc.field, tc.msg)
		}
		if err != nil {
			checkNoSecret(t, "Check", err.Error())
		}
	}
}

func TestReadSecretTrims(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		"alice\n":    "alice",
		"alice\r\n":  "alice",
		"alice\n\n":  "alice",
		" alice ":    " alice ",
		"pa ss\tx\n": "pa ss\tx",
	} {
		got, err := readSecret(writeFile(t, dir, "f", content))
		if err != nil || got != want {
			t.Errorf("readSecret(%q) = %q, %v; want %q", content, got, err, want)
		}
	}
}
