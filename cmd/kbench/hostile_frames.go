package main

import (
	"encoding/binary"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bombFrame is a Produce v9 request (acks=1) to topic/partition 0 whose
// records are `batches` zstd record batches, each one record that inflates
// to `inflate` bytes of zeros: small on the wire, huge for anything that
// decompresses it (kproxy does, to read trace headers, with
// tracing.links.decompress on).
func bombFrame(topic string, batches, inflate int) []byte {
	rec := kmsg.Record{Value: make([]byte, inflate)}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	if err != nil {
		panic(err) // only bad options fail
	}
	compressed := enc.EncodeAll(rec.AppendTo(nil), nil)
	enc.Close()
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           4, // zstd
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              compressed,
	}
	raw := sealBatch(batch)
	var records []byte
	for range batches {
		records = append(records, raw...)
	}
	return produceRecordsFrame(topic, records, "kbench-bomb")
}

// manyPartitionsFrame is a Produce v9 request (acks=1) naming `parts`
// partitions of one topic, each with null records: six bytes a partition,
// so a few MB name a million. It is written directly rather than through
// kmsg, which would hold a struct per partition in the attacker.
func manyPartitionsFrame(topic string, parts int) []byte {
	const clientID = "kbench-oversize"
	b := make([]byte, 4, 64+len(topic)+6*parts)
	b = binary.BigEndian.AppendUint16(b, 0) // Produce
	b = binary.BigEndian.AppendUint16(b, produceVersion)
	b = binary.BigEndian.AppendUint32(b, 0) // correlation id
	b = binary.BigEndian.AppendUint16(b, uint16(len(clientID)))
	b = append(b, clientID...)
	b = append(b, 0)                        // header tags
	b = append(b, 0)                        // transactional id: null
	b = binary.BigEndian.AppendUint16(b, 1) // acks
	b = binary.BigEndian.AppendUint32(b, 30000)
	b = binary.AppendUvarint(b, 2) // one topic
	b = binary.AppendUvarint(b, uint64(len(topic)+1))
	b = append(b, topic...)
	b = binary.AppendUvarint(b, uint64(parts+1))
	for i := range parts {
		b = binary.BigEndian.AppendUint32(b, uint32(i))
		b = append(b, 0, 0) // null records, no tags
	}
	b = append(b, 0, 0) // topic tags, request tags
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// hogPrefix is the start of a Produce frame that claims `size` bytes: the
// size prefix and a whole header, after which a hog sends filler it never
// finishes.
func hogPrefix(size int) []byte {
	b := manyPartitionsFrame("kbench", 0)
	binary.BigEndian.PutUint32(b, uint32(size))
	return b[:len(b)-3] // up to the topic array; the rest is filler
}
