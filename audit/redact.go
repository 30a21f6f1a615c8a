package audit

import "strings"

// redactedValue replaces the value of a config that holds a secret.
const redactedValue = "[redacted]"

// Config names are matched lowercased, so that listener-prefixed broker
// configs (listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config) are
// caught with their plain forms. Together the two lists cover every
// config Kafka types as PASSWORD (ssl.key.password, ssl.keystore.password,
// ssl.truststore.password, ssl.keystore.key, sasl.jaas.config,
// delegation.token.master.key, delegation.token.secret.key,
// password.encoder.secret, password.encoder.old.secret,
// sasl.oauthbearer.client.credentials.client.secret,
// sasl.oauthbearer.assertion.private.key.passphrase, the zookeeper.ssl
// passwords) but two: ssl.keystore.certificate.chain and
// ssl.truststore.certificates hold certificates, which are public, and are
// kept so that a change of trust can be audited.
var (
	// secretParts: a name containing one of these holds a secret.
	secretParts = []string{"password", "passphrase", "secret", "credentials"}
	// secretSuffixes: a name ending in one of these holds one: private
	// keys (ssl.keystore.key, the delegation token keys) and JAAS
	// configurations, which carry passwords inline.
	secretSuffixes = []string{".key", "sasl.jaas.config"}
)

// secret reports whether the config named name holds a secret, so that
// its value must never reach the log.
func secret(name string) bool {
	n := strings.ToLower(name)
	for _, p := range secretParts {
		if strings.Contains(n, p) {
			return true
		}
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// configValue is the value to record for config name: a copy, or
// redactedValue for a secret; nil (reset to default) stays nil.
func (b *builder) configValue(name string, value *string) *string {
	if value == nil {
		return nil
	}
	if secret(name) {
		v := redactedValue
		return &v
	}
	return b.optStr(value)
}
