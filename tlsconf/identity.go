package tlsconf

import "crypto/tls"

// Identities are the names a verified client certificate gives its holder,
// the principals policies match: its URI SANs in certificate order
// (SPIFFE IDs such as spiffe://cluster.local/ns/payments/sa/api), then its
// subject CN when it has one. nil when the connection has no verified
// client certificate (plaintext, client_auth none, or a client that sent
// none under request): such a connection has no identity, and a rule with
// `principal` never matches it.
//
// Only a chain kproxy verified counts (VerifiedChains): under client_auth
// none a certificate a client volunteers is never asked for, so never
// trusted.
func Identities(cs tls.ConnectionState) []string {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	leaf := cs.VerifiedChains[0][0]
	ids := make([]string, 0, len(leaf.URIs)+1)
	for _, u := range leaf.URIs {
		ids = append(ids, u.String())
	}
	if leaf.Subject.CommonName != "" {
		ids = append(ids, leaf.Subject.CommonName)
	}
	if len(ids) == 0 {
		return nil
	}
	return ids
}

// Principal is the one name logged on connection open and set as the span
// attribute: the first URI SAN, else the subject CN; "" with no identity.
func Principal(cs tls.ConnectionState) string {
	if ids := Identities(cs); len(ids) > 0 {
		return ids[0]
	}
	return ""
}

// ClientIdentity is what a verified client certificate proves, its URI
// SANs (certificate order) and its subject CN kept apart, for rules that
// must not take one for the other. Empty when the connection has no
// verified client certificate (see Identities).
func ClientIdentity(cs tls.ConnectionState) (uris []string, cn string) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil, ""
	}
	leaf := cs.VerifiedChains[0][0]
	for _, u := range leaf.URIs {
		uris = append(uris, u.String())
	}
	return uris, leaf.Subject.CommonName
}
