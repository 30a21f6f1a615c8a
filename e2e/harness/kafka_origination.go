package harness

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ReauthLifetime is the session lifetime of the origination listeners
// (connections.max.reauth.ms): every authenticated connection must
// re-authenticate (KIP-368) within it or the broker closes it.
const ReauthLifetime = 10 * time.Second

// OAuthSubject is the subject ("sub") of the unsecured JWTs that
// OAuthToken makes: the principal the broker sees on OAUTHBEARER.
const OAuthSubject = "alice"

// KafkaOrigination are the broker's listeners for the sasl-origination
// cells: slots of three listeners each, one slot per cell, so that cells
// run at once, each through kproxies of its own (their counters and logs
// are the cell's alone). Every listener advertises the address of the
// kproxy that originates SASL to it, as a broker in the client-pod shape
// is reached, and ends sessions after ReauthLifetime.
type KafkaOrigination struct {
	Slots []OriginationSlot
	// Issuer, when set (WithOAuthIssuer), adds each slot's JWT listener.
	Issuer *Hydra
}

// OriginationSlot is one cell's listeners:
//
//   - SCRAM: SASL_PLAINTEXT with SCRAM-SHA-512 (user ScramUser);
//   - SCRAMTLS: SASL_SSL with SCRAM-SHA-512, presenting Certs.ServerCert;
//   - OAuth: SASL_PLAINTEXT with OAUTHBEARER, validating unsecured JWTs
//     (alg none, Kafka's default validator), see OAuthToken;
//   - JWT and JWT2 (WithOAuthIssuer only): SASL_PLAINTEXT with
//     OAUTHBEARER, validating signed JWTs against the issuer's JWKS with
//     Kafka's own OAuthBearerValidatorCallbackHandler (audience
//     HydraAudience); a session ends no later than its token expires.
//     Two, so that a cell's producer and consumer each have a kproxy.
//
// ProxySCRAM, ProxySCRAMTLS, ProxyOAuth, ProxyJWT and ProxyJWT2 are the
// plaintext addresses they advertise, where the slot's kproxies listen.
type OriginationSlot struct {
	SCRAM, SCRAMTLS, OAuth, JWT, JWT2                          string
	ProxySCRAM, ProxySCRAMTLS, ProxyOAuth, ProxyJWT, ProxyJWT2 string
}

// originationPortsPerSlot is how many free ports a slot takes.
const originationPortsPerSlot = 10

func newKafkaOrigination(ports []int, issuer *Hydra) KafkaOrigination {
	a := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	o := KafkaOrigination{Issuer: issuer}
	for i := 0; i+originationPortsPerSlot <= len(ports); i += originationPortsPerSlot {
		o.Slots = append(o.Slots, OriginationSlot{
			SCRAM: a(i), SCRAMTLS: a(i + 1), OAuth: a(i + 2), JWT: a(i + 6), JWT2: a(i + 8),
			ProxySCRAM: a(i + 3), ProxySCRAMTLS: a(i + 4), ProxyOAuth: a(i + 5), ProxyJWT: a(i + 7), ProxyJWT2: a(i + 9),
		})
	}
	return o
}

// originationListener names slot i's listener kind ("SCRAM", "SCRAMTLS",
// "OAUTH") in the broker's configuration.
func originationListener(kind string, i int) string { return fmt.Sprintf("ORIG%s%d", kind, i) }

func (o KafkaOrigination) listeners() []listener {
	var ls []listener
	for i, s := range o.Slots {
		ls = append(ls,
			listener{originationListener("SCRAM", i), s.SCRAM, s.ProxySCRAM, "SASL_PLAINTEXT"},
			listener{originationListener("SCRAMTLS", i), s.SCRAMTLS, s.ProxySCRAMTLS, "SASL_SSL"},
			listener{originationListener("OAUTH", i), s.OAuth, s.ProxyOAuth, "SASL_PLAINTEXT"},
		)
		if o.Issuer != nil {
			ls = append(ls, listener{originationListener("JWT", i), s.JWT, s.ProxyJWT, "SASL_PLAINTEXT"},
				listener{originationListener("JWTB", i), s.JWT2, s.ProxyJWT2, "SASL_PLAINTEXT"})
		}
	}
	return ls
}

// properties enable one mechanism per listener, with its JAAS entry and
// the session lifetime for that listener and mechanism (the broker's
// other listeners keep the default, no re-authentication). OAUTHBEARER
// has no server callback handler set: the broker's default is the
// unsecured-JWT validator; the login module's unsecuredLoginStringClaim_sub
// serves only the broker's own client side, which these listeners never
// use, but the module must be configured for the mechanism.
func (o KafkaOrigination) properties() []string {
	lifetime := fmt.Sprint(ReauthLifetime.Milliseconds())
	jaasScram := `org.apache.kafka.common.security.scram.ScramLoginModule required;`
	jaasOAuth := `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="kafka";`
	var lines []string
	for i := range o.Slots {
		for _, kind := range []string{"SCRAM", "SCRAMTLS"} {
			p := "listener.name." + strings.ToLower(originationListener(kind, i)) + "."
			lines = append(lines,
				p+"sasl.enabled.mechanisms=SCRAM-SHA-512",
				p+"scram-sha-512.sasl.jaas.config="+jaasScram,
				p+"scram-sha-512.connections.max.reauth.ms="+lifetime)
		}
		p := "listener.name." + strings.ToLower(originationListener("OAUTH", i)) + "."
		lines = append(lines,
			p+"sasl.enabled.mechanisms=OAUTHBEARER",
			p+"oauthbearer.sasl.jaas.config="+jaasOAuth,
			p+"oauthbearer.connections.max.reauth.ms="+lifetime)
		for _, kind := range []string{"JWT", "JWTB"} {
			h := o.Issuer
			if h == nil {
				break
			}
			// Re-authentication on, with a bound far above the tokens'
			// lifetime: the token's expiry ends each session.
			p := "listener.name." + strings.ToLower(originationListener(kind, i)) + "."
			lines = append(lines,
				p+"sasl.enabled.mechanisms=OAUTHBEARER",
				p+"oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
				p+"oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
				p+"oauthbearer.sasl.oauthbearer.jwks.endpoint.url="+h.JWKSURL,
				p+"oauthbearer.sasl.oauthbearer.expected.audience="+HydraAudience,
				p+"oauthbearer.sasl.oauthbearer.expected.issuer="+h.Issuer,
				p+"oauthbearer.sasl.oauthbearer.scope.claim.name=scp",
				p+"oauthbearer.connections.max.reauth.ms=3600000")
		}
	}
	return lines
}

// OAuthToken is an unsecured JWT (RFC 7519 section 6: header alg none,
// empty signature) for OAuthSubject, valid for valid from now: what the
// broker's default OAUTHBEARER validator accepts.
func OAuthToken(valid time.Duration) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now()
	return enc(map[string]string{"alg": "none"}) + "." +
		enc(map[string]any{"sub": OAuthSubject, "iat": now.Unix(), "exp": now.Add(valid).Unix()}) + "."
}
