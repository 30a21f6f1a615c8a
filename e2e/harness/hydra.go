package harness

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// HydraEnv names the Ory Hydra binary to use; e2e/run.sh builds one
// (from tools/hydra, with SQLite) into its cache and sets it.
const HydraEnv = "KPROXY_E2E_HYDRA"

// HydraTokenLifetime is the lifetime of the access tokens Hydra issues
// (ttl.access_token): brokers bound each session by it.
const HydraTokenLifetime = 60 * time.Second

// HydraAudience is the audience the OAuth client may ask for and the
// brokers expect (sasl.oauthbearer.expected.audience).
const HydraAudience = "kafka"

// Hydra is a running Ory Hydra: a real OAuth 2.0 authorization server
// with in-memory storage, issuing RS256 JWT access tokens, with one
// client for the client credentials grant.
type Hydra struct {
	*Proc
	TokenURL string // the token endpoint
	JWKSURL  string // the keys brokers validate tokens with
	Issuer   string // the tokens' iss
	ClientID string
	Secret   string
}

// HydraBinary returns the Hydra binary built by e2e/run.sh, failing the
// test with what to run when it is missing.
func HydraBinary(t testing.TB) string {
	t.Helper()
	return toolBinary(t, HydraEnv, "Ory Hydra", "cd e2e/tools/hydra && go build -tags sqlite -o /tmp/hydra github.com/ory/hydra/v2")
}

// StartHydra starts Hydra on free loopback ports and registers the
// client, returning once both are done.
func StartHydra(t testing.TB) *Hydra {
	t.Helper()
	bin := HydraBinary(t)
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		p := FreePorts(t, 2)
		public, admin := fmt.Sprintf("http://127.0.0.1:%d", p[0]), fmt.Sprintf("http://127.0.0.1:%d", p[1])
		secret := make([]byte, 24)
		rand.Read(secret)
		h := &Hydra{TokenURL: public + "/oauth2/token", JWKSURL: public + "/.well-known/jwks.json", Issuer: public + "/",
			ClientID: "kafka-orders", Secret: "e2e-" + hex.EncodeToString(secret)}
		env := Env("DSN=memory", "URLS_SELF_ISSUER="+h.Issuer, "STRATEGIES_ACCESS_TOKEN=jwt",
			"TTL_ACCESS_TOKEN="+HydraTokenLifetime.String(),
			fmt.Sprintf("SERVE_PUBLIC_PORT=%d", p[0]), "SERVE_PUBLIC_HOST=127.0.0.1",
			fmt.Sprintf("SERVE_ADMIN_PORT=%d", p[1]), "SERVE_ADMIN_HOST=127.0.0.1",
			"SECRETS_SYSTEM=e2e-system-secret-of-at-least-32-chars", "LOG_LEVEL=warn")
		start := time.Now()
		h.Proc = Start(t, "hydra", bin, []string{"serve", "all", "--dev", "--sqa-opt-out"}, env, "")
		err := waitHTTP(h.Proc, admin+"/health/ready", 30*time.Second)
		if err == nil {
			err = h.createClient(admin)
		}
		if err == nil {
			t.Logf("hydra ready in %v: token endpoint %s, JWKS %s", time.Since(start).Round(time.Millisecond), h.TokenURL, h.JWKSURL)
			return h
		}
		lastErr = err
		if !errors.Is(err, errExited) || !strings.Contains(h.Output(), "address already in use") {
			break
		}
		t.Logf("hydra lost a port race (attempt %d); retrying with new ports", attempt)
	}
	t.Fatalf("hydra did not become ready: %v", lastErr)
	return nil
}

// createClient registers the client credentials client, allowed the
// brokers' audience, through Hydra's admin API.
func (h *Hydra) createClient(admin string) error {
	body, _ := json.Marshal(map[string]any{
		"client_id": h.ClientID, "client_secret": h.Secret,
		"grant_types": []string{"client_credentials"}, "token_endpoint_auth_method": "client_secret_basic",
		"audience": []string{HydraAudience}, "access_token_strategy": "jwt",
	})
	resp, err := http.Post(admin+"/admin/clients", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return fmt.Errorf("creating the OAuth client: %s: %s", resp.Status, b.String())
	}
	return nil
}

// Token fetches an access token with the client's credentials, as a
// client of Hydra would.
func (h *Hydra) Token() (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "audience": {HydraAudience}}
	req, err := http.NewRequest(http.MethodPost, h.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(h.ClientID, h.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.AccessToken == "" {
		return "", fmt.Errorf("hydra token endpoint: %s %s %v", resp.Status, out.Error, err)
	}
	return out.AccessToken, nil
}
