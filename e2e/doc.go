// Package e2e holds kproxy's end-to-end tests: the kproxy binary, built
// from this repository, runs as its own process against real peers that
// also run as processes: Apache Kafka brokers fetched from Maven Central,
// Kafka client libraries in five languages, and a Jaeger v2 receiving
// kproxy's spans over OTLP.
//
// It is a separate Go module so that the clients' dependency graphs stay
// out of kproxy's go.mod (Jaeger is pinned in yet another module,
// tools/jaeger). Run it with `bash e2e/run.sh` from the repository root:
// that installs what is missing into a cache, then runs `go test` here.
// Every process listens on 127.0.0.1 only and is killed when its test
// ends.
//
// TestCompat is the compatibility matrix (client × scenario × broker,
// written to COMPAT.md; its cluster column runs on a three-node cluster
// behind a kproxy in cluster mode; its sasl-origination column runs every
// library without credentials through kproxies that authenticate and
// re-authenticate to the broker for it; its governance column runs every
// library through a kproxy with policy require rules and the audit log
// on, and checks the refusals and the log against the broker), the fault
// tests restart kproxy and the broker under a producer and drop clients
// mid-request, TestClusterBrokerRestart stops and starts a broker of the
// cluster under a producer behind kproxy in cluster mode, and
// TestSpansReachJaeger follows kproxy's spans into Jaeger.
package e2e
