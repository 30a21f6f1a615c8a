// Package cluster holds what kproxy needs to front a whole Kafka cluster
// from the client's side (issue 16). For now that is the broker address
// rewriter: it replaces every broker host:port a response carries with the
// address the caller maps it to, and reports the brokers it saw so the
// caller can learn the topology. It has no transport and no configuration;
// the relay wires it in.
//
// It fails closed: a response of an address-bearing API that cannot be
// parsed is an error, never passed on, because a real broker address that
// reaches a client lets it bypass the proxy.
package cluster
