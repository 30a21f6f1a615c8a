package records

import "github.com/kproxy/kproxy/internal/batchtest"

// The batch builders of internal/batchtest, by short names.
var (
	encodeRecords = batchtest.EncodeRecords
	makeBatch     = batchtest.MakeBatch
	plainBatch    = batchtest.PlainBatch
	hdrs          = batchtest.Headers
	concat        = batchtest.Concat
	gzipped       = batchtest.Gzipped
	snappyRaw     = batchtest.SnappyRaw
	xerial        = batchtest.Xerial
	lz4Framed     = batchtest.LZ4Framed
	zstdAll       = batchtest.ZstdAll
	zstdStream    = batchtest.ZstdStream
	sampleRecords = batchtest.SampleRecords
	tracedRecord  = batchtest.TracedRecord
)

const (
	codecGzip   = batchtest.Gzip
	codecSnappy = batchtest.Snappy
	codecLZ4    = batchtest.LZ4
	codecZstd   = batchtest.Zstd
)
