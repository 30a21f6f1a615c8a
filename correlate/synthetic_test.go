package correlate

import (
	"bytes"
	"testing"
)

// TestSyntheticKeepsOrder checks an answer kproxy makes itself waits behind
// the forwarded requests sent before it, so the client sees request order.
func TestSyntheticKeepsOrder(t *testing.T) {
	tb := New(4)
	synth := respFrame(2, 0, 35) // an error response kproxy built
	a, _ := tb.Push(Entry{Kind: Forwarded, ClientID: 1})
	if _, err := tb.Push(Entry{Kind: Synthetic, ClientID: 2, Response: synth}); err != nil {
		t.Fatal(err)
	}
	b, _ := tb.Push(Entry{Kind: Forwarded, ClientID: 3})

	if e, ok := tb.PopSynthetic(); ok {
		t.Fatalf("synthetic popped ahead of A: %+v", e)
	}
	if e, err := tb.Pop(respFrame(a)); err != nil || e.ClientID != 1 {
		t.Fatalf("A: %+v, %v", e, err)
	}
	e, ok := tb.PopSynthetic()
	if !ok || e.Kind != Synthetic || e.ClientID != 2 || !bytes.Equal(e.Response, synth) {
		t.Fatalf("S: %+v, %v", e, ok)
	}
	if _, ok := tb.PopSynthetic(); ok {
		t.Fatal("B popped as synthetic")
	}
	if e, err := tb.Pop(respFrame(b)); err != nil || e.ClientID != 3 {
		t.Fatalf("B: %+v, %v", e, err)
	}
	if _, ok := tb.PopSynthetic(); ok {
		t.Fatal("PopSynthetic on an empty table")
	}
}

// TestSyntheticAtHeadRefusesUpstream checks an upstream response is not
// matched past a synthetic entry the caller forgot to take first.
func TestSyntheticAtHeadRefusesUpstream(t *testing.T) {
	tb := New(2)
	_, _ = tb.Push(Entry{Kind: Synthetic, ClientID: 9, Response: respFrame(9)})
	b, _ := tb.Push(Entry{Kind: Forwarded})
	if _, err := tb.Pop(respFrame(b)); err == nil {
		t.Fatal("upstream response popped past a synthetic head")
	}
	if tb.Len() != 2 {
		t.Fatalf("Len %d, want 2", tb.Len())
	}
	if e, ok := tb.PopSynthetic(); !ok || e.ClientID != 9 {
		t.Fatalf("synthetic head: %+v %v", e, ok)
	}
	if _, err := tb.Pop(respFrame(b)); err != nil {
		t.Fatal(err)
	}
}
