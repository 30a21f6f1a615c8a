// Package e2e holds kproxy's end-to-end tests: the kproxy binary, built
// from this repository, runs as its own process against real peers that
// also run as processes (a Jaeger v2 receiving kproxy's spans over OTLP;
// later real Apache Kafka brokers and clients).
//
// It is a separate Go module so that the peers' large dependency graphs
// (Jaeger is built from its Go module as a tool of this module) stay out
// of kproxy's go.mod. Run it with `bash e2e/run.sh` from the repository
// root: that builds e2e/bin/jaeger when it is missing or stale, then runs
// `go test` here. Every process listens on 127.0.0.1 only and is killed
// when its test ends.
package e2e
