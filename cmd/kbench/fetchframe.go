package main

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchVersion is the Fetch version the load generator sends unless told
// otherwise (--fetch-version): the first whose response can carry
// KIP-951's NodeEndpoints, so a cluster-mode kproxy walks every one.
const fetchVersion = 16

// fetchFrame builds a whole Fetch request frame of version v for
// topic/partition 0 from offset 0, outside any fetch session, that asks
// the null broker for about records bytes of records: its MinBytes, which
// the null broker meets at once (see nullBroker.fetch). A real broker
// answers it too, once it holds that much. Callers patch the correlation
// id per request.
func fetchFrame(v int16, topic string, records int, clientID string) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.MaxWaitMillis = 500
	req.MinBytes = int32(records)
	req.MaxBytes = maxFrame
	req.SessionEpoch = -1 // no session: every request names its partitions
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	if v >= 13 {
		t.TopicID = topicID(topic)
	}
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = 0
	p.PartitionMaxBytes = int32(max(records, 1<<20))
	t.Partitions = []kmsg.FetchRequestTopicPartition{p}
	req.Topics = []kmsg.FetchRequestTopic{t}
	return requestFrame(req, 0, clientID)
}

// checkFetchResponse decodes a Fetch response body of version v (after the
// response header) and fails on any error, or on a partition without the
// records asked for, so a run against a broker that has none does not
// report empty answers as throughput.
func checkFetchResponse(v int16, body []byte, records int) error {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = v
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decoding fetch response: %w", err)
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("fetch: error code %d", resp.ErrorCode)
	}
	n := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("fetch from %s/%d: error code %d", t.Topic, p.Partition, p.ErrorCode)
			}
			n += len(p.RecordBatches)
		}
	}
	if records > 1 && n == 0 {
		return fmt.Errorf("fetch: no records in the response (asked for %d bytes)", records)
	}
	return nil
}
