// Package correlate keeps the InFlight table of one upstream connection:
// the FIFO of requests sent upstream and not yet answered, in the spirit of
// Kafka's InFlightRequests, bounded by the `correlate:` section of
// kproxy.yaml (max_in_flight).
//
// kproxy gives each forwarded request an upstream correlation id of its own
// and restores the client's id on the response. Responses must match the
// head of the FIFO; anything else means the stream is out of step, and the
// caller closes the pair. Responses kproxy makes itself (synthetic ones) take
// a place in the same FIFO, so a client always sees answers in request
// order.
//
// The table also follows a client's SASL exchange with the broker: after a
// SaslHandshake v0 the tokens that follow carry no Kafka header, so Frame
// tells the relay whether a client frame is a request to judge, a raw
// token to relay untouched, or must wait for an answer the broker still
// owes, and matches tokens to their answers by position. Drain closes the
// table to new requests so that a connection can be closed without losing
// a response.
package correlate
