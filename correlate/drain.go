package correlate

// Drain stops the table taking new entries and reports whether none is in
// flight. Deciding both at once is what makes a drain safe: a Push either
// came first, and its response is awaited, or fails with ErrDraining, and
// its request is never sent. Without it a request pushed between "empty"
// and the close would reach the broker and lose its response, and a
// client retrying it would apply it twice. The gate bit sends every later
// Push to the locked path, which refuses it; a fast Push already under way
// is waited for before the table is looked at.
func (t *Table) Drain() (empty bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gate.Or(gateDraining)
	t.quiesce()
	return t.Len() == 0
}

// Drained reports whether Drain was called and every entry has left the
// table. Once true it stays true: nothing can be pushed again.
func (t *Table) Drained() bool {
	return t.gate.Load()&gateDraining != 0 && t.Len() == 0
}
