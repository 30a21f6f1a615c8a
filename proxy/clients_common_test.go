package proxy

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"testing"
)

// recordCount is how many records each real client round-trips.
const recordCount = 100_000

// keyOf and valueOf are the records every client test produces: distinct
// keys, values that differ in length and content.
func keyOf(i int) []byte   { return []byte(fmt.Sprintf("key-%06d", i)) }
func valueOf(i int) []byte { return []byte(fmt.Sprintf("value-%d-%s", i, string(make([]byte, i%97)))) }

// ledger checks that what was consumed is exactly what was produced.
type ledger struct {
	seen map[string][32]byte
	dups int
}

func newLedger() *ledger { return &ledger{seen: make(map[string][32]byte, recordCount)} }

// add records one consumed record.
func (l *ledger) add(key, value []byte) {
	if _, ok := l.seen[string(key)]; ok {
		l.dups++
	}
	l.seen[string(key)] = sha256.Sum256(value)
}

// verify fails t unless every record 0..n-1 arrived once, byte-equal.
func (l *ledger) verify(t testing.TB, n int) {
	t.Helper()
	if l.dups > 0 {
		t.Errorf("%d records consumed more than once", l.dups)
	}
	var missing, wrong []string
	for i := 0; i < n; i++ {
		got, ok := l.seen[string(keyOf(i))]
		switch {
		case !ok:
			missing = append(missing, string(keyOf(i)))
		case got != sha256.Sum256(valueOf(i)):
			wrong = append(wrong, string(keyOf(i)))
		}
	}
	if len(l.seen) != n {
		t.Errorf("consumed %d distinct keys, want %d", len(l.seen), n)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d records missing, first %q", len(missing), missing[0])
	}
	if len(wrong) > 0 {
		t.Errorf("%d records with a different value, first %q", len(wrong), wrong[0])
	}
}
