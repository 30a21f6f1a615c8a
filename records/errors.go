package records

import "errors"

// Why a batch is not decoded for a change; the caller relays it as it
// came.
var (
	ErrNotBatch = errors.New("not a whole magic-2 record batch")
	ErrCRC      = errors.New("record batch fails its CRC")
	ErrControl  = errors.New("control batch (a transaction marker): never changed")
	ErrRecords  = errors.New("record batch's records do not match its header")
)
