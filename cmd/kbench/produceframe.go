package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceVersion is the Produce version the load generator sends unless
// told otherwise (--produce-version): the first flexible one (header v2,
// compact encoding), spoken by every broker since Kafka 2.4 and still by
// Kafka 4. Its response cannot carry KIP-951's NodeEndpoints (v10+), so a
// cluster-mode kproxy relays it without walking it.
const produceVersion = 9

// produceFrame builds a whole Produce v9 request frame (acks=1); see
// produceFrameAt.
func produceFrame(topic string, size int, clientID string) []byte {
	return produceFrameAt(produceVersion, topic, size, clientID)
}

// produceFrameAt builds a whole Produce request frame of version v (acks=1)
// to topic/partition 0 carrying one record batch of one record, whose value
// is sized so that the frame is size bytes, or as small as it can be when
// size is below the frame's overhead. The batch is valid (CRC included), so
// a real broker accepts it too. Callers patch the correlation id per
// request.
func produceFrameAt(v int16, topic string, size int, clientID string) []byte {
	valueLen := 0
	frame := encodeProduce(v, topic, valueLen, clientID)
	// The record and batch lengths are varints, so the overhead can move by
	// a byte or two as the value grows: converge in a few bounded steps.
	for range 8 {
		delta := size - len(frame)
		if delta == 0 || (valueLen == 0 && delta < 0) {
			break
		}
		valueLen = max(valueLen+delta, 0)
		frame = encodeProduce(v, topic, valueLen, clientID)
	}
	return frame
}

func encodeProduce(v int16, topic string, valueLen int, clientID string) []byte {
	return produceRecordsFrameAt(v, topic, oneRecordBatch(valueLen), clientID)
}

// oneRecordBatch is a sealed v2 record batch at base offset 0 holding one
// record whose value is valueLen bytes.
func oneRecordBatch(valueLen int) []byte {
	rec := kmsg.Record{Value: make([]byte, valueLen)}
	for i := range rec.Value {
		rec.Value[i] = byte('a' + i%26)
	}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // everything after the 1-byte zero Length
	records := rec.AppendTo(nil)

	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		FirstTimestamp:       now,
		MaxTimestamp:         now,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              records,
	}
	return sealBatch(batch)
}

// sealBatch encodes a record batch with its Length and CRC filled in.
func sealBatch(batch kmsg.RecordBatch) []byte {
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))                                          // Length: after itself
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // CRC from Attributes on
	return raw
}

// produceRecordsFrame is a Produce v9 request frame (acks=1) carrying
// records, one or more batches, to topic/partition 0.
func produceRecordsFrame(topic string, records []byte, clientID string) []byte {
	return produceRecordsFrameAt(produceVersion, topic, records, clientID)
}

// produceRecordsFrameAt is produceRecordsFrame at version v; from v13 the
// topic is named by its id, the one the null broker gives the name.
func produceRecordsFrameAt(v int16, topic string, records []byte, clientID string) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version = v
	req.Acks = 1
	req.TimeoutMillis = 30000
	req.Topics = []kmsg.ProduceRequestTopic{{
		Topic:      topic,
		Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: records}},
	}}
	if v >= 13 {
		req.Topics[0].TopicID = topicID(topic)
	}
	return requestFrame(req, 0, clientID)
}

// requestFrame encodes req as a whole request frame with the header
// version its key and version need.
func requestFrame(req kmsg.Request, corr int32, clientID string) []byte {
	dst := make([]byte, 4, 64)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	if req.IsFlexible() {
		dst = append(dst, 0) // no header tags
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst, uint32(len(dst)-4))
	return dst
}

// checkProduceResponse decodes a Produce response body of version v (after
// the response header) and fails on any partition error, so a load run
// against a broker that refuses the records does not report refusals as
// throughput.
func checkProduceResponse(v int16, body []byte) error {
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = v
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decoding produce response: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("produce to %s/%d: error code %d", t.Topic, p.Partition, p.ErrorCode)
			}
		}
	}
	return nil
}
