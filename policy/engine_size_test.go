package policy

import (
	"encoding/binary"
	"testing"
)

// batch is a record batch header claiming n records, padded to size
// bytes: enough for the size rules, which read only the header.
func batch(size, n int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	b[16] = 2 // magic
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	return b
}

// max_request_bytes refuses the whole request: MESSAGE_TOO_LARGE for
// Produce, POLICY_VIOLATION for others; Fetch is never refused for size.
func TestSizeMaxRequestBytes(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "big", Action: ActionReject, Limits: Limits{MaxRequestBytes: 100}})
	p := produce("orders")
	p.Topics[0].Partitions[0].Records = batch(200, 1)
	if v := request(t, p, "app-1").check(e, t0); v.Outcome != Reject || v.Code != 10 || v.Partitions != nil {
		t.Fatalf("big produce: %+v, want Reject 10 of the whole request", v)
	}
	if v := request(t, metadata("orders"), "app-1").check(e, t0); v.Outcome != Pass {
		t.Fatalf("small metadata: %+v, want Pass", v)
	}
	md := metadata("a-very-long-topic-name-to-pass-one-hundred-bytes", "another-very-long-topic-name-for-the-same")
	if v := request(t, md, "app-1").check(e, t0); v.Outcome != Reject || v.Code != 44 {
		t.Fatalf("big metadata: %+v, want Reject 44", v)
	}
	f := request(t, fetch("orders"), "app-1")
	f.r.Bytes = 1000
	if v := f.check(e, t0); v.Outcome != Pass {
		t.Fatalf("big fetch: %+v, want Pass", v)
	}
}

// Batch limits refuse only the partitions over them, with
// MESSAGE_TOO_LARGE, and leave the rest of the produce to the broker.
func TestSizeBatchLimits(t *testing.T) {
	e, _ := newEngine(t, Rule{Name: "batches", Action: ActionReject, Limits: Limits{MaxBatchBytes: 1000, MaxBatchRecords: 10}})
	p := produce("small", "bytes", "records")
	p.Topics[0].Partitions[0].Records = batch(100, 1)
	p.Topics[1].Partitions[0].Records = batch(2000, 1)
	p.Topics[2].Partitions[0].Records = batch(100, 11)
	v := request(t, p, "app-1").check(e, t0)
	if v.Outcome != Reject || v.Code != 10 || len(v.Partitions) != 2 ||
		v.Partitions[0].Topic != "bytes" || v.Partitions[1].Topic != "records" {
		t.Fatalf("verdict %+v, want Reject 10 of partitions bytes/0 and records/0", v)
	}
	p.Topics = p.Topics[:1]
	if v := request(t, p, "app-1").check(e, t0); v.Outcome != Pass {
		t.Fatalf("only small batches: %+v, want Pass", v)
	}
}
