// Package relay is the Kafka half of a proxied connection, with no
// transport in it: a Session takes the client's request frames and the
// broker's response frames one at a time, as whole frames, and says what to
// write to each side by adding frames to a Batch. It owns what Kafka needs
// of a connection: the InFlight table (correlation ids rewritten and
// restored, kproxy's own answers kept in request order), the SASL v0 raw
// token phase, acks=0 produces, the policy state, the spans being ended
// and the counters.
//
// It also answers every Kafka question a driver asks: whether a batch may
// run without waiting (RequestsInline, ResponsesInline), how long a
// throttled client is still held (Held), how a batch is relayed where it
// may wait, oversize frames judged from their header (RequestBatch,
// ResponseBatch), what an error means for the connection (Classify), and
// how SASL origination logs a connection in and re-authenticates it
// (Origination, built by package sasl).
//
// The drivers move the bytes: proxy/loop on netpoll's event loop for
// plaintext, proxy/stream on crypto/tls over Go's net for TLS. A driver
// reads whole frames, hands them to the Session, writes the batches it
// fills, and implements Link for the few things a Session must ask of it
// when it has to wait (a full InFlight table, a SASL answer, a throttle).
package relay
