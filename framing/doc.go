// Package framing reads complete Kafka frames (int32 big-endian size, then
// that many bytes) from a netpoll reader and understands the fixed parts of
// request and response headers.
//
// It mirrors Kafka's NetworkReceive: the size prefix is read and checked
// against a configured maximum before any byte of the body is waited for, and
// a frame is handed on only when it is whole. It knows nothing about
// connections, correlation or policies, so the same code serves plaintext
// netpoll connections and any other byte stream wrapped in netpoll.Reader.
package framing
