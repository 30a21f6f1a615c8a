package correlate

import (
	"errors"
	"strings"
	"testing"
)

// TestMismatch checks a response that is not for the oldest request is
// reported with both ids, and leaves the table as it was: the caller closes
// the pair and needs the entries for their spans.
func TestMismatch(t *testing.T) {
	tb := New(4)
	a, _ := tb.Push(Entry{ClientID: -17})
	b, _ := tb.Push(Entry{ClientID: 4})
	_, err := tb.Pop(respFrame(b, 0, 0))
	var me *MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("err %v, want *MismatchError", err)
	}
	if me.Want != a || me.Got != b || me.ClientID != -17 {
		t.Fatalf("got %+v, want Want %d Got %d ClientID -17", me, a, b)
	}
	for _, s := range []string{"-17", "does not match"} {
		if !strings.Contains(me.Error(), s) {
			t.Fatalf("%q lacks %q", me.Error(), s)
		}
	}
	if tb.Len() != 2 {
		t.Fatalf("Len %d after a mismatch, want 2", tb.Len())
	}
	if e, err := tb.Pop(respFrame(a)); err != nil || e.ClientID != -17 {
		t.Fatalf("head after mismatch: %+v, %v", e, err)
	}
}

// TestShortResponse checks a frame too short to hold an id is an error,
// not a panic, and pops nothing.
func TestShortResponse(t *testing.T) {
	tb := New(1)
	_, _ = tb.Push(Entry{})
	for _, f := range [][]byte{nil, {0, 0, 0, 3, 0, 0, 0}} {
		if _, err := tb.Pop(f); err == nil {
			t.Fatalf("%x accepted", f)
		}
	}
	if tb.Len() != 1 {
		t.Fatal("a short frame popped the head")
	}
}
