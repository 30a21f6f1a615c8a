// Package proxy is a kproxy server: the proxy section's configuration,
// the listeners (proxy.listen, and in cluster mode a port per broker),
// cluster discovery through the bootstrap, readiness, and Go's memory
// limit. It wires the connection core (proxy/core) to the driver that
// relays its connections: netpoll's event loop for plaintext
// (proxy/loop), Go's net and crypto/tls when either side speaks TLS
// (proxy/stream). Every Kafka decision is the session's (package relay);
// a fault in one connection closes that connection and nothing else.
package proxy
