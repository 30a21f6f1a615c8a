package framing_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// fetchFrame is a whole Fetch request frame of version v asking to wait
// waitMS, encoded by kmsg behind a real header.
func fetchFrame(v int16, waitMS int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.ReplicaID = v, waitMS, 1, 1<<20, -1
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic = "orders"
	part := kmsg.NewFetchRequestTopicPartition()
	part.Partition, part.FetchOffset, part.PartitionMaxBytes = 3, 42, 1<<20
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 7)
}

// TestShortenFetchWaitEveryVersion takes a hold off the wait of Fetch
// requests of every version and reads them back with kmsg: only
// max_wait_ms changes, and it never goes below 0.
func TestShortenFetchWaitEveryVersion(t *testing.T) {
	for v := int16(0); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
		for _, c := range []struct {
			wait int32
			held time.Duration
			want int32
		}{{500, 120 * time.Millisecond, 380}, {500, 0, 500}, {375, time.Second, 0}} {
			frame := fetchFrame(v, c.wait)
			h, err := framing.ParseRequestHeader(frame)
			if err != nil {
				t.Fatalf("v%d: %v", v, err)
			}
			left, ok := framing.ShortenFetchWait(frame, h, c.held)
			if !ok || left != c.want {
				t.Fatalf("v%d: wait %d held %v: left %d ok %v, want %d", v, c.wait, c.held, left, ok, c.want)
			}
			got := kmsg.NewPtrFetchRequest()
			got.Version = v
			if err := got.ReadFrom(frame[h.BodyOffset:]); err != nil {
				t.Fatalf("v%d: the shortened frame does not decode: %v", v, err)
			}
			if got.MaxWaitMillis != c.want || got.MinBytes != 1 || len(got.Topics) != 1 || got.Topics[0].Partitions[0].FetchOffset != 42 {
				t.Fatalf("v%d: decoded wait %d min %d topics %+v", v, got.MaxWaitMillis, got.MinBytes, got.Topics)
			}
		}
	}
}

// TestShortenFetchWaitOnlyFetch leaves other requests and short frames as
// they are.
func TestShortenFetchWaitOnlyFetch(t *testing.T) {
	frame := fetchFrame(11, 500)
	h, _ := framing.ParseRequestHeader(frame)
	if _, ok := framing.ShortenFetchWait(frame[:h.BodyOffset+6], h, time.Second); ok {
		t.Fatal("a frame cut inside max_wait_ms was shortened")
	}
	h.APIKey = framing.KeyProduce
	before := string(frame)
	if _, ok := framing.ShortenFetchWait(frame, h, time.Second); ok || string(frame) != before {
		t.Fatal("a request that is no Fetch was changed")
	}
}
