package tracing

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// wantFacts is what a request should yield, batches aside.
type wantFacts struct {
	topics     []string
	partitions int
	partition  int32 // checked only when partitions is 1
	group      string
	records    int
}

// decodeAliased decodes req from its own encoding with UnsafeReadFrom, as
// framing.Body does, and returns the buffer the result aliases.
func decodeAliased(t *testing.T, req kmsg.Request) (kmsg.Request, []byte) {
	t.Helper()
	buf := req.AppendTo(nil)
	out := kmsg.RequestForKey(req.Key())
	out.SetVersion(req.GetVersion())
	if err := out.(kmsg.UnsafeReadFrom).UnsafeReadFrom(buf); err != nil {
		t.Fatalf("%T v%d: %v", req, req.GetVersion(), err)
	}
	return out, buf
}

// Each API yields its topics (distinct, in order), partition count, group
// and record count, and the strings outlive the frame they were read from.
func TestRequestFacts(t *testing.T) {
	ids := learnt(t, map[string][16]byte{"orders": topicID(1), "audit": topicID(2)})
	for _, tc := range requestCases() {
		t.Run(tc.name, func(t *testing.T) {
			req, buf := decodeAliased(t, tc.req)
			f := requestFacts(req, ids)
			if f.records != tc.want.records {
				t.Errorf("records %d, want %d", f.records, tc.want.records)
			}
			// The frame is released once relayed and its buffer reused.
			for i := range buf {
				buf[i] = '#'
			}
			got := wantFacts{topics: f.topics, partitions: f.partitions, group: f.group, records: f.records}
			if f.partitions == 1 { // the partition is told only when alone
				got.partition = f.partition
			}
			if !slices.Equal(got.topics, tc.want.topics) || got.partitions != tc.want.partitions ||
				got.partition != tc.want.partition || got.group != tc.want.group {
				t.Errorf("facts %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The clone check above can only fail if decoding really aliases the
// buffer; make sure it does, or that test proves nothing.
func TestRequestFactsDecodeAliases(t *testing.T) {
	req, buf := decodeAliased(t, offsetCommitReq(8, "grp", map[string][]int32{"orders": {0}}))
	for i := range buf {
		buf[i] = '#'
	}
	r := req.(*kmsg.OffsetCommitRequest)
	if r.Group == "grp" || r.Topics[0].Topic == "orders" {
		t.Fatal("UnsafeReadFrom copied the strings; the clone test is vacuous")
	}
}

// Produce keeps each partition's records for link extraction.
func TestRequestFactsBatches(t *testing.T) {
	one := plainBatch(kmsg.Record{Value: []byte("b")})
	f := requestFacts(produceReq(9, produceTopic("t", [16]byte{}, one, nil)), nil)
	if len(f.batches) != 2 || !slices.Equal(f.batches[0], one) || f.batches[1] != nil {
		t.Errorf("batches %v", f.batches)
	}
}

func TestOperationType(t *testing.T) {
	for key, want := range map[int16]string{0: "send", 1: "receive", 8: "settle", 28: "settle", 3: "", 18: "", 9: ""} {
		if got := operationType(key); got != want {
			t.Errorf("key %d: %q, want %q", key, got, want)
		}
	}
}
