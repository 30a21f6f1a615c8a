// Package policy decides, per request, what kproxy does besides relaying:
// answer in the broker's place with a real Kafka error, throttle the way a
// broker quota does, or only record what would have happened. It exists
// so that access, size and rate rules are enforced in kproxy in the
// broker's own terms: a client meets the errors and throttles it would
// meet from the broker, and reacts to them the same way.
//
// It owns the `policies:` section of kproxy.yaml (Config, Rule), its
// compilation into an Engine (rebuilt on each reload, with the per-rule
// counters of Metrics shared across reloads), and the decision for each
// request (Engine.Check, and Engine.CheckOversize from a header alone),
// with the token buckets that rate rules charge. It also writes the
// answers a decision calls for, in the broker's layout: error responses
// (ErrorResponse, ProduceRefusal, WithRefusedPartitions), a produce split
// to drop refused partitions (WithoutPartitions), a throttle time set on a
// response (WithThrottle) and ApiVersions answers clamped to what kproxy
// can read (ClampVersions).
//
// It does not read connections or hold a pair's state beyond its
// ConnState: the relay hands it each request and applies the Verdict.
package policy
