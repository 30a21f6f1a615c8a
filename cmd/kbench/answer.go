package main

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// answered lists the API keys the null broker answers: what a producer, a
// consumer group member and the load generator need, and nothing else. It
// advertises exactly these in ApiVersions, so a client never sends another.
var answered = []int16{
	0,  // Produce
	1,  // Fetch
	2,  // ListOffsets
	3,  // Metadata
	8,  // OffsetCommit
	9,  // OffsetFetch
	10, // FindCoordinator
	11, // JoinGroup
	12, // Heartbeat
	13, // LeaveGroup
	14, // SyncGroup
	18, // ApiVersions
	22, // InitProducerID
}

// apiKeys is the ApiVersions list: every version kmsg can decode.
var apiKeys = func() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(answered))
	for _, k := range answered {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: framing.MaxVersion(k)})
	}
	return keys
}()

// errUnsupportedVersion is Kafka's UNSUPPORTED_VERSION.
const errUnsupportedVersion = 35

// answer appends the response frame to one request frame, or nothing for an
// acks=0 produce. An error means the connection should close, as a broker
// closes on a request it cannot read.
func (b *nullBroker) answer(dst []byte, h framing.RequestHeader, frame []byte) ([]byte, error) {
	if h.HeaderVersion < 0 {
		if h.APIKey == framing.KeyApiVersions {
			// A broker answers an ApiVersions it is too old for in v0,
			// with its own list, so the client can retry with a version
			// both know.
			resp := &kmsg.ApiVersionsResponse{ErrorCode: errUnsupportedVersion, ApiKeys: apiKeys}
			return appendResponse(dst, h.APIKey, 0, h.CorrelationID, resp), nil
		}
		return dst, fmt.Errorf("%s v%d: unknown key or version", framing.Name(h.APIKey), h.APIVersion)
	}
	req := kmsg.RequestForKey(h.APIKey)
	req.SetVersion(h.APIVersion)
	// The unsafe read aliases strings to the frame; they are used only
	// until the response is encoded below, before the frame is reused.
	if err := req.(kmsg.UnsafeReadFrom).UnsafeReadFrom(frame[h.BodyOffset:]); err != nil {
		return dst, fmt.Errorf("%s v%d: %w", framing.Name(h.APIKey), h.APIVersion, err)
	}
	var resp kmsg.Response
	switch req := req.(type) {
	case *kmsg.ProduceRequest:
		if req.Acks == 0 {
			return dst, nil // no response, as Kafka does
		}
		resp = b.produce(req)
	case *kmsg.FetchRequest:
		resp = b.fetch(req)
	case *kmsg.ListOffsetsRequest:
		resp = listOffsets(req)
	case *kmsg.MetadataRequest:
		resp = b.metadata(req)
	case *kmsg.ApiVersionsRequest:
		r := req.ResponseKind().(*kmsg.ApiVersionsResponse)
		r.ApiKeys = apiKeys
		resp = r
	case *kmsg.InitProducerIDRequest:
		r := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		r.ProducerID = b.producers.Add(1)
		resp = r
	default:
		if resp = b.group(req); resp == nil {
			return dst, fmt.Errorf("%s: not answered by kbench's null broker", framing.Name(h.APIKey))
		}
	}
	return appendResponse(dst, h.APIKey, h.APIVersion, h.CorrelationID, resp), nil
}

// produce acks every partition, handing out offsets as a log would.
func (b *nullBroker) produce(req *kmsg.ProduceRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			rp.Default()
			rp.Partition = p.Partition
			n := numRecords(p.Records)
			rp.BaseOffset = b.offsets.Add(n) - n
			rp.LogStartOffset = 0
		}
	}
	return resp
}

// numRecords counts the records of the v2 record batches in a produce
// partition (1 for anything older or malformed), read from each batch
// header without decoding the records.
func numRecords(records []byte) int64 {
	const lengthOff, magicOff, countOff, headerLen = 8, 16, 57, 61
	var n int64
	for len(records) >= headerLen && records[magicOff] == 2 {
		n += int64(int32(binary.BigEndian.Uint32(records[countOff:])))
		next := 12 + int(int32(binary.BigEndian.Uint32(records[lengthOff:])))
		if next < headerLen || next > len(records) {
			break
		}
		records = records[next:]
	}
	return max(n, 1)
}

// fetch answers at once. A partition gets one record batch of about
// MinBytes bytes at the offset asked for, as a broker holding that much
// would send, when MinBytes is above 1 (kbench load --api fetch asks so);
// otherwise, as for the clients' consumers, which ask for 1 byte, every
// partition is empty.
func (b *nullBroker) fetch(req *kmsg.FetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			rp := &rt.Partitions[j]
			rp.Default()
			rp.Partition = p.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = 0, 0, 0
			if req.MinBytes > 1 && p.FetchOffset >= 0 {
				rp.RecordBatches = fetchedBatch(int(min(req.MinBytes, maxFetchedBatch)), p.FetchOffset)
				rp.HighWatermark = p.FetchOffset + 1
				rp.LastStableOffset = rp.HighWatermark
			}
		}
	}
	return resp
}

// maxFetchedBatch bounds the batch a Fetch's MinBytes can ask for.
const maxFetchedBatch = 64 << 20

// fetchedBatches caches fetchedBatch's batches at offset 0 by size: a
// load asks for one size over and over.
var fetchedBatches sync.Map // int -> []byte

// fetchedBatch is a valid record batch of one record at offset, about size
// bytes long (at least the 70 or so of a batch of one empty record). The
// batch at offset 0 is shared: callers only read it.
func fetchedBatch(size int, offset int64) []byte {
	batch, ok := fetchedBatches.Load(size)
	if !ok {
		overhead := len(oneRecordBatch(0))
		batch, _ = fetchedBatches.LoadOrStore(size, oneRecordBatch(max(size-overhead, 0)))
	}
	raw := batch.([]byte)
	if offset == 0 {
		return raw
	}
	raw = append([]byte(nil), raw...)
	binary.BigEndian.PutUint64(raw, uint64(offset)) // base offset, outside the CRC
	return raw
}

// listOffsets says every partition is empty: its start and end are 0.
func listOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.Offset, rp.LeaderEpoch = 0, 0
			if req.Version == 0 {
				rp.OldStyleOffsets = []int64{0}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// metadata names the broker itself as the only broker and the leader of
// every partition. Any topic asked for exists; asking for all topics lists
// the configured one.
func (b *nullBroker) metadata(req *kmsg.MetadataRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.cfg.NodeID, Host: b.host, Port: b.port}}
	resp.ClusterID = kmsg.StringPtr("kbench")
	resp.ControllerID = b.cfg.NodeID
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		resp.Topics = append(resp.Topics, b.topicMetadata(b.cfg.Topic))
	}
	for _, t := range req.Topics {
		if t.Topic != nil {
			resp.Topics = append(resp.Topics, b.topicMetadata(*t.Topic))
			continue
		}
		if name, ok := topicNames.Load(t.TopicID); ok {
			resp.Topics = append(resp.Topics, b.topicMetadata(name.(string)))
			continue
		}
		rt := kmsg.NewMetadataResponseTopic()
		rt.TopicID, rt.ErrorCode = t.TopicID, 100 // UNKNOWN_TOPIC_ID
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (b *nullBroker) topicMetadata(name string) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.TopicID = kmsg.StringPtr(name), topicID(name)
	for p := range b.cfg.Partitions {
		pt := kmsg.NewMetadataResponseTopicPartition()
		pt.Partition, pt.Leader, pt.LeaderEpoch = int32(p), b.cfg.NodeID, 0
		pt.Replicas, pt.ISR = []int32{b.cfg.NodeID}, []int32{b.cfg.NodeID}
		t.Partitions = append(t.Partitions, pt)
	}
	return t
}

// topicNames maps the ids topicID handed out back to names, for Metadata
// requests by id (v10+). Shared by every broker in the process: ids are a
// pure function of the name.
var topicNames sync.Map // [16]byte -> string

// topicID is a stable id for a topic name, so every connection and every
// run agrees on it without state.
func topicID(name string) [16]byte {
	var id [16]byte
	sum := sha256.Sum256([]byte("kbench/" + name))
	copy(id[:], sum[:])
	if _, ok := topicNames.Load(id); !ok {
		topicNames.Store(id, strings.Clone(name)) // name may alias a frame
	}
	return id
}
