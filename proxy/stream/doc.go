// Package stream is kproxy's driver for TLS on either side, which
// netpoll cannot carry: Go's net and crypto/tls, one goroutine per
// direction, each reading whole frames from its side (streamReader) only
// when its relay is ready for more, so TCP holds a fast peer back, and
// writing batches in as few TLS records as they fit (streamWriter).
//
// It moves bytes only: what a frame means is asked of relay, and the
// opening, lifecycle, budget and close of a connection are proxy/core's.
package stream
