// Package proxy is kproxy's relay: it accepts client connections, pairs each
// with its own upstream connection on the netpoll event loop, and moves whole
// Kafka frames both ways with their correlation ids rewritten through the
// pair's InFlight table.
//
// A pair plays the part of Kafka's KafkaChannel: one transport per side,
// one receive buffer per side (netpoll's), and one writer owner per side.
// Anything that goes wrong in a pair closes that pair and nothing else.
package proxy
