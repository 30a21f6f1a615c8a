package correlate

import "testing"

// The ring starts empty and doubles as a connection pipelines deeper; a
// grow that happens while the entries wrap around the ring's end must keep
// them in FIFO order, and the ring never outgrows max.
func TestRingGrowsInOrder(t *testing.T) {
	tb := New(48)
	if len(tb.ring) != 0 {
		t.Fatalf("new table holds a ring of %d entries; an idle connection should hold none", len(tb.ring))
	}
	var ids []int32
	pushed, popped := 0, 0
	for _, step := range [][2]int{{3, 2}, {3, 1}, {6, 4}, {20, 3}, {26, 10}, {6, 40}} {
		for range step[0] {
			id, err := tb.Push(Entry{ClientID: int32(pushed)})
			if err != nil {
				t.Fatalf("push %d (%d in flight): %v", pushed, pushed-popped, err)
			}
			ids = append(ids, id)
			pushed++
		}
		if len(tb.ring) > 48 {
			t.Fatalf("ring grew to %d entries, past max 48", len(tb.ring))
		}
		for range step[1] {
			e, err := tb.Pop(respFrame(ids[popped]))
			if err != nil || e.ClientID != int32(popped) {
				t.Fatalf("pop %d: entry for client id %d, err %v", popped, e.ClientID, err)
			}
			popped++
		}
	}
	for range 48 - tb.Len() {
		if _, err := tb.Push(Entry{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.Push(Entry{}); err != ErrFull {
		t.Fatalf("push past max: %v, want ErrFull", err)
	}
}
