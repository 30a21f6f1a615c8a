// Package records owns Kafka record batches (magic 2, Produce v3+ and
// Fetch v4+). It walks the batches of a records field and reads record
// headers without decoding records (the tracer's links), inflates
// compressed batches within a budget (pooled decoders, process-wide
// slots), and, for features that change records, decodes a batch's
// records and encodes the batch again: lengths, CRC-32C and codec
// recomputed, every other header field kept.
package records
