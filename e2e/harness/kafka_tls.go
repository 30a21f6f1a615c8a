package harness

import (
	"fmt"
	"strings"
	"testing"
)

// KafkaTLS are the broker's listeners for the TLS cells, six listeners of
// the one broker process so that every TLS cell shares it:
//
//   - DirectTLS and DirectMTLS are SSL listeners advertised as themselves
//     (the control); DirectMTLS requires a client certificate.
//   - TermTLS and TermMTLS are PLAINTEXT listeners advertising the address
//     of a kproxy that terminates the clients' TLS (the broker-pod
//     sidecar shape): ProxyTermTLSAddr, ProxyTermMTLSAddr.
//   - OrigTLS and OrigMTLS are SSL listeners advertising the plaintext
//     address of a kproxy that originates TLS to them (the client-pod
//     sidecar shape): ProxyOrigTLSAddr, ProxyOrigMTLSAddr. OrigMTLS
//     requires kproxy's client certificate.
//
// Every SSL listener presents Certs.ServerCert and trusts Certs.CA, given
// to the broker as PEM text (ssl.keystore.type=PEM, no JKS file).
type KafkaTLS struct {
	Certs *Certs

	DirectTLS, DirectMTLS string
	TermTLS, TermMTLS     string
	OrigTLS, OrigMTLS     string

	ProxyTermTLSAddr, ProxyTermMTLSAddr string
	ProxyOrigTLSAddr, ProxyOrigMTLSAddr string
}

// kafkaTLSPorts is how many free ports newKafkaTLS takes.
const kafkaTLSPorts = 10

func newKafkaTLS(t testing.TB, ports []int) KafkaTLS {
	t.Helper()
	a := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	return KafkaTLS{
		Certs:     NewCerts(t),
		DirectTLS: a(0), DirectMTLS: a(1),
		TermTLS: a(2), TermMTLS: a(3),
		OrigTLS: a(4), OrigMTLS: a(5),
		ProxyTermTLSAddr: a(6), ProxyTermMTLSAddr: a(7),
		ProxyOrigTLSAddr: a(8), ProxyOrigMTLSAddr: a(9),
	}
}

// listeners are the TLS cells' listeners.
func (k KafkaTLS) listeners() []listener {
	return []listener{
		{"DIRECTTLS", k.DirectTLS, k.DirectTLS, "SSL"},
		{"DIRECTMTLS", k.DirectMTLS, k.DirectMTLS, "SSL"},
		{"TERMTLS", k.TermTLS, k.ProxyTermTLSAddr, "PLAINTEXT"},
		{"TERMMTLS", k.TermMTLS, k.ProxyTermMTLSAddr, "PLAINTEXT"},
		{"ORIGTLS", k.OrigTLS, k.ProxyOrigTLSAddr, "SSL"},
		{"ORIGMTLS", k.OrigMTLS, k.ProxyOrigMTLSAddr, "SSL"},
	}
}

// properties are the broker settings of the SSL listeners: the key store
// and trust store as inline PEM (a file-based PEM key store would need an
// encrypted key), and client authentication required on the mTLS ones.
func (k KafkaTLS) properties(t testing.TB) []string {
	t.Helper()
	c := k.Certs
	return []string{
		"ssl.keystore.type=PEM",
		"ssl.keystore.certificate.chain=" + propertyText(c.Read(t, c.ServerCert)),
		"ssl.keystore.key=" + propertyText(c.Read(t, c.ServerKey)),
		"ssl.truststore.type=PEM",
		"ssl.truststore.certificates=" + propertyText(c.Read(t, c.CA)),
		"ssl.client.auth=none",
		"listener.name.directmtls.ssl.client.auth=required",
		"listener.name.origmtls.ssl.client.auth=required",
	}
}

// propertyText escapes multi-line text for a Java properties file.
func propertyText(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "\n", `\n`)
}
