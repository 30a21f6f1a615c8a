// Package cluster holds what kproxy needs to front a whole Kafka cluster
// from the client's side (issue 16), so that a client that learns broker
// addresses from responses still reaches every broker through kproxy:
//
//   - the `cluster:` section of kproxy.yaml (Config): off by default;
//     with node_port_base set, one port per broker node id, written into
//     responses with the advertised host;
//   - the broker address rewriter (Rewrite, and Fronting, which applies
//     it to relayed responses), which replaces every broker host:port a
//     response carries with the node port the caller maps it to, and
//     reports the brokers it saw;
//   - the Topology those responses, and kproxy's own Discover
//     (ApiVersions then Metadata over a connection the caller dialled),
//     teach it: the real address behind each node port.
//
// It dials nothing and owns no listener; the proxy wires it in.
//
// It fails closed: a response of an address-bearing API that cannot be
// parsed is an error, never passed on, because a real broker address that
// reaches a client lets it bypass the proxy.
package cluster
