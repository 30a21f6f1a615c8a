// Package doccheck holds only the documentation's tests: that every
// relative link in README.md, BENCHMARKS.md and docs/ leads to a file
// that exists, and to a heading that exists where it names one, and that
// every field of examples/kproxy.yaml is in docs/configuration.md, in the
// table of its section. It has no code of its own.
package doccheck
