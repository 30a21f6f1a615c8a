// Package framing owns the Kafka wire format as far as kproxy reads it: it
// reads complete frames (int32 big-endian size, then that many bytes) from
// any framing.Source, and understands the fixed parts of request and
// response headers, so that the relay, the policy engine and tracing all
// work from one parse of each frame instead of three.
//
// Reading mirrors Kafka's NetworkReceive: the size prefix is read and
// checked against a configured maximum (the `framing:` section of
// kproxy.yaml) before any byte of the body is waited for, and a frame is
// handed on only when it is whole. A Source is a connection's buffered
// input, not a connection: netpoll's Reader is one, and so is the stream
// driver's reader over a net.Conn (TLS), so the same code serves both
// drivers. A body refused by its size is never buffered: Stream reads the
// few fields a refusal needs (StreamProduce) and drops the rest as it
// arrives.
//
// Beyond the headers, framing holds what kproxy must know of each API,
// taken from franz-go's kmsg so that kproxy agrees with the library that
// decodes bodies: which keys and versions it can read (Known, Flexible,
// the header versions), their names (Name, KeyForName), the API keys it
// treats specially (KeyProduce and the other Key constants, kmsg's own
// values), a request's body decoded once and shared (Body), the topics a
// request names (EachTopic, with the topic ids learnt from Metadata in
// TopicIDs) and the first error a response carries (FirstError).
//
// It knows nothing about connections, correlation or policies.
package framing
