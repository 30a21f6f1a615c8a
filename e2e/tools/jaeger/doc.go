// Package jaeger pins the Jaeger v2 release that the end-to-end suite
// builds as a tool (`go build github.com/jaegertracing/jaeger/cmd/jaeger`
// in this directory). It is a module of its own so that Jaeger's large
// dependency graph never mixes with the Kafka clients the suite tests.
package jaeger
