// Package core is what both of kproxy's drivers share of a connection:
// the one registry of open connections (max_connections, the drain), the
// one opening sequence (a slot, the upstream's address, the dial, the
// login of SASL origination, the session, registration), the one
// lifecycle and close path (a closing log line and the close counters),
// and the one process-wide buffer budget, whose victim may be any
// connection, whichever driver relays it.
//
// A driver (proxy/loop on netpoll's event loop, proxy/stream over Go's
// net and crypto/tls) keeps only its transport mechanics: it reads
// whole frames, hands them to the connection's relay.Session, writes
// what the session batched, waits where the session says, and reports
// closes here. Every Kafka decision is the session's (package relay).
//
// A connection moves through four states, each move made in state.go:
//
//	opening ──register──▶ relaying ──Drain──▶ draining
//	   │                     │                   │
//	   └─────────────────────┴───────Close───────┴──▶ closed
//
// opening: built by Open, not yet registered (a refused registration
// closes it without a log line, the client reset). relaying: registered,
// its driver relays both ways. draining: nothing new is sent upstream;
// it closes once every response owed is written, or when the drain's
// deadline closes it. closed: both sockets are closed, its in-flight
// requests failed, its budget charge given back, its slot freed, one
// line logged. Close is the only way into closed, and runs once.
package core
