// Package kclients drives real Kafka client libraries through one small
// interface, so the compatibility suite runs the same scenarios with each:
// Go libraries in process, other languages as driver programs under
// e2e/clients/ that follow the command-line contract in
// e2e/clients/CONTRACT.md.
package kclients

import (
	"context"
	"time"
)

// Record is one record to produce. Keys are unique within a scenario;
// values are printable ASCII without tabs or newlines, so every driver can
// pass them through text.
type Record struct{ Key, Value string }

// Delivered is one record a consumer received.
type Delivered struct {
	Member    int // which consumer of the group (0 or 1)
	Partition int32
	Key       string
	Value     string
	// Traceparent is the record's traceparent header as the library
	// handed it to the application ("" when it has none).
	Traceparent string
}

// SASL is the authentication to use; the zero value is none.
type SASL struct {
	Mechanism string // "PLAIN" or "SCRAM-SHA-512"
	User      string
	Password  string
}

// TLS is how to secure the connection; the zero value is plaintext.
// Each driver maps it onto its library's own TLS options.
type TLS struct {
	// CAFile (PEM) turns TLS on: the broker's (or kproxy's) certificate
	// must chain to it and name the host of the address dialled.
	CAFile string
	// CertFile and KeyFile (PEM, PKCS#8 key), when set, are the client
	// certificate to present (mTLS).
	CertFile, KeyFile string
}

// On says whether the connection uses TLS.
func (t TLS) On() bool { return t.CAFile != "" }

// Conn is where and how to connect.
type Conn struct {
	Bootstrap string // host:port
	SASL      SASL
	TLS       TLS
}

// ProduceOpts describes one produce run.
type ProduceOpts struct {
	Conn
	Topic       string
	Acks        string // "all", "1" or "0"
	Compression string // "none", "gzip", "snappy", "lz4" or "zstd"
	Idempotent  bool
	// TransactionalID, when set, makes the producer transactional: it
	// first produces Aborted in a transaction it aborts, then the records
	// in a transaction it commits.
	TransactionalID string
	Aborted         []Record
	// Pace, when set, is the wait before each record but the first: the
	// records then go out one by one over len(recs) × Pace on the same
	// connections, so a producer stays connected and busy for that long
	// (the sasl-origination cells, across several re-authentications).
	Pace time.Duration
	// Faults says the network will fail for seconds at a time
	// (connections reset, cut mid-frame or black-holed): the driver
	// configures its library's retries to ride that out, as an
	// application on a flaky network would, and nothing that hides a
	// failure. Most libraries' defaults already do
	// (TestToxicsEveryClient); franz-go needs AlwaysRetryEOF (franzFaults)
	// and kcat -E (clients/kcat/driver.py).
	Faults bool
}

// ConsumeOpts describes one consume run by consumer group, from the
// earliest offset.
type ConsumeOpts struct {
	Conn
	Topic string
	Group string
	// Count is how many distinct keys to wait for before returning.
	Count   int
	Timeout time.Duration
	// Protocol is "classic" (JoinGroup/SyncGroup) or "consumer" (KIP-848,
	// ConsumerGroupHeartbeat).
	Protocol      string
	ReadCommitted bool
	// Members is how many consumers join the group (1 or 2); with 2 both
	// run at once in the same group, so the group rebalances.
	Members int
	// Faults is ProduceOpts.Faults for the consumers.
	Faults bool
}

// AdminOpts describes the admin scenario: create Topic with Partitions,
// describe it and check the partition count, delete it and check that it
// is gone.
type AdminOpts struct {
	Conn
	Topic      string
	Partitions int
}

// pause waits pace before record i (none before the first, none when
// pace is 0), or until ctx ends.
func pause(ctx context.Context, pace time.Duration, i int) error {
	if pace <= 0 || i == 0 {
		return nil
	}
	t := time.NewTimer(pace)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Feature is something a scenario needs from a client library.
type Feature string

const (
	Gzip         Feature = "gzip"
	Snappy       Feature = "snappy"
	LZ4          Feature = "lz4"
	Zstd         Feature = "zstd"
	Acks0        Feature = "acks=0"
	Acks1        Feature = "acks=1"
	Rebalance    Feature = "rebalance"
	KIP848       Feature = "kip848"
	Transactions Feature = "transactions"
	Idempotence  Feature = "idempotence" // an idempotent producer
	SASLPlain    Feature = "sasl-plain"
	SASLScram    Feature = "sasl-scram512"
	Admin        Feature = "admin"
	// AdminMessage is an admin client that hands the application the
	// error message of a CreateTopics answer (Kafka's error_message, v1+),
	// not only its error code.
	AdminMessage Feature = "admin-error-message"
	PerfTools    Feature = "perf-tools"
	// RackFetch is a consumer that fetches with Fetch v11 or later, the
	// versions with a rack_id (KIP-392).
	RackFetch Feature = "rack-fetch"
	// ClientMetrics is a client that pushes its own metrics with
	// PushTelemetry when a broker offers it (KIP-714).
	ClientMetrics Feature = "client-metrics"
)

// Driver is one client library.
type Driver interface {
	// Name is the matrix row, e.g. "franz-go v1.22.3".
	Name() string
	// Unsupported says why the library cannot run f, or "" when it can.
	Unsupported(f Feature) string
	// Produce writes recs and returns once each is acknowledged (acks=all
	// or 1) or written (acks=0). It fails on any record's error, with the
	// library's own form of it.
	Produce(ctx context.Context, o ProduceOpts, recs []Record) error
	// Consume reads by consumer group until o.Count distinct keys arrived
	// or o.Timeout passed (an error, with what arrived).
	Consume(ctx context.Context, o ConsumeOpts) ([]Delivered, error)
	// Admin runs the admin scenario.
	Admin(ctx context.Context, o AdminOpts) error
	// CreateTopic creates topic with partitions (replication factor 1)
	// with one call of the library's admin client and returns once the
	// broker answered: nil for success, else the library's error, with
	// the broker's message as far as the library passes it on.
	CreateTopic(ctx context.Context, c Conn, topic string, partitions int) error
	// DeleteTopic deletes topic with one call of the library's admin
	// client and returns once the broker answered, as CreateTopic.
	DeleteTopic(ctx context.Context, c Conn, topic string) error
}

// PerfDriver is a driver that also ships load tools (the Java client's
// ProducerPerformance and ConsumerPerformance).
type PerfDriver interface {
	Driver
	// Perf produces n records of size bytes with the producer tool, then
	// reads them back with the consumer tool.
	Perf(ctx context.Context, c Conn, topic string, n, size int) error
}
