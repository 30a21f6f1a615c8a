// Package sasl owns the `sasl:` section of kproxy.yaml and the client side
// of SASL for kproxy's upstream connections (origination): kproxy
// authenticates each broker connection with credentials it reads from
// files (a mounted Secret), so the application holds none, and
// re-authenticates it before the session the broker granted expires
// (KIP-368). The mechanisms are franz-go's (pkg/sasl/plain, scram, oauth);
// this package drives them over Kafka requests and never dials or owns a
// socket: the caller gives it a RoundTrip (StreamRoundTrip, over a
// connection the caller dialled, or the relay's own). A broker's refusal
// comes back as an error wrapping an *AuthError, with the broker's code.
//
// A driver's use, in outline:
//
//	m := sasl.NewMetrics(reg)
//	o, err := sasl.New(cfg.SASL, m, log) // nil when off; cmd/kproxy runs cfg.SASL.Check() first
//	// after dialling (and TLS), before relaying the client's first byte:
//	res, err := o.Authenticate(ctx, sasl.StreamRoundTrip(conn, 512<<10), hostPort, nil)
//	// err: reset the client, log err once (it holds no secret)
//	at := sasl.ReauthAt(time.Now(), res.Lifetime) // zero: never
//	// at `at`, with new requests parked and the InFlight table empty:
//	res, err = o.Authenticate(ctx, relayRoundTrip, hostPort, &res)
//	// /readyz: o.Ready(); ApiVersions to clients: leave out sasl.HiddenAPIs()
//
// The package logs only what a connection's own log line cannot say: that
// authentication works again after failing (info), and each success at
// debug. Failures are returned, for the caller's one line per connection.
package sasl
