// Package tlsconf owns the `tls:` section of kproxy.yaml and everything
// about TLS that does not depend on a transport: loading and checking the
// certificate files, reloading them live when they change (Kubernetes
// Secret rotation included), the *tls.Config each side hands to crypto/tls,
// the client identity policies match on, and the handshake and certificate
// metrics. The drivers in proxy/ call it; it never touches a socket.
package tlsconf
