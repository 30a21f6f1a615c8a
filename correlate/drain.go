package correlate

// Drain stops the table taking new entries and reports whether none is in
// flight. Deciding both under one lock is what makes a drain safe: a Push
// either came first, and its response is awaited, or fails with
// ErrDraining, and its request is never sent. Without it a request pushed
// between "empty" and the close would reach the broker and lose its
// response, and a client retrying it would apply it twice.
func (t *Table) Drain() (empty bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.draining = true
	return t.n == 0
}

// Drained reports whether Drain was called and every entry has left the
// table. Once true it stays true: nothing can be pushed again.
func (t *Table) Drained() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.draining && t.n == 0
}
