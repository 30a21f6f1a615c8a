package relay

// Batch is the frames a relay pass has for one side, in order, to be
// written together (one writev, or one TLS write). The frames are slices
// of the driver's input buffer, or answers kproxy made: a driver writes
// them before it releases its input.
type Batch [][]byte

// Add appends a frame.
func (b *Batch) Add(frame []byte) { *b = append(*b, frame) }

// Reset empties the batch for reuse, dropping its references to frames.
func (b *Batch) Reset() {
	clear(*b)
	*b = (*b)[:0]
}

// Bytes is the batch's total length.
func (b Batch) Bytes() int {
	n := 0
	for _, f := range b {
		n += len(f)
	}
	return n
}
