// Package tlsconf owns the `tls:` section of kproxy.yaml and everything
// about TLS that does not depend on a transport: loading and checking the
// certificate files, reloading them live when they change (Kubernetes
// Secret rotation included), the *tls.Config each side hands to crypto/tls,
// the client identity policies match on, and the handshake and certificate
// metrics. The drivers in proxy/ call it; it never owns a socket.
//
// A driver's use, in outline:
//
//	m := tlsconf.NewMetrics(reg)
//	st, err := tlsconf.New(cfg.TLS, m, log) // at start, after cfg.TLS.Check; st.Close() at exit
//	// accept:
//	tc := tls.Server(conn, st.ServerConfig())
//	if err := m.HandshakeConn(tc, tlsconf.SideClient, cfg.TLS.Listener.Timeout()); err != nil {
//		log.Warn().Err(err).Str("tls_result", tlsconf.ClassifyHandshakeError(err)).Msg("...") // one line, then close
//	}
//	uris, cn := tlsconf.ClientIdentity(tc.ConnectionState()) // policy.Identity, kept apart
//	principal := tlsconf.Principal(tc.ConnectionState())     // log and span attribute
//	// dial:
//	uc := tls.Client(raw, st.ClientConfig(upstreamHostPort))
//	err = m.HandshakeConn(uc, tlsconf.SideUpstream, cfg.TLS.Upstream.Timeout())
//
// ServerConfig can be built once: it takes the material in force at each
// handshake. ClientConfig is built per dial.
package tlsconf
