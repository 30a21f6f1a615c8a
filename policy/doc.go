// Package policy decides, per request, what kproxy does besides relaying:
// answer in the broker's place with a real Kafka error, throttle the way a
// broker quota does, or only record what would have happened.
package policy
