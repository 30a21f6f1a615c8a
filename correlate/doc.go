// Package correlate keeps the InFlight table of one upstream connection:
// the FIFO of requests sent upstream and not yet answered, in the spirit of
// Kafka's InFlightRequests.
//
// kproxy gives each forwarded request an upstream correlation id of its own
// and restores the client's id on the response. Responses must match the
// head of the FIFO; anything else means the stream is out of step, and the
// caller closes the pair. Responses kproxy makes itself (synthetic ones) take
// a place in the same FIFO, so a client always sees answers in request
// order.
package correlate
