// Package loop is kproxy's plaintext driver, on cloudwego/netpoll's event
// loop: a pair is one client connection and its own upstream connection,
// each side read by its OnRequest handler, whole frames handed to the
// connection's relay.Session. Batches the session says may run without
// waiting are relayed on the poller that read them (runTask) and written
// with raw sendmsg; the rest run in netpoll's goroutine pool. netpoll
// reads without backpressure, so a sweep watches the pairs whose relay
// waits, against max_unread_bytes, write_timeout and the core's buffer
// budget.
//
// It moves bytes only: what a frame means is asked of relay, and the
// opening, lifecycle, budget and close of a connection are proxy/core's.
package loop
