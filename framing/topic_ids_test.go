package framing

import (
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func topicID(b byte) [16]byte {
	return [16]byte{0xcc, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, b}
}

type mdTopic struct {
	name *string
	id   [16]byte
}

// metadataFrame is a Metadata response frame of version v.
func metadataFrame(v int16, topics ...mdTopic) []byte {
	md := kmsg.NewPtrMetadataResponse()
	md.Version = v
	for _, x := range topics {
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic, tp.TopicID = x.name, x.id
		md.Topics = append(md.Topics, tp)
	}
	return encodeResponse(md, 1)
}

func named(name string, id [16]byte) mdTopic { return mdTopic{kmsg.StringPtr(name), id} }

func TestTopicIDsLearn(t *testing.T) {
	ids := NewTopicIDs()
	ids.Learn(metadataFrame(12, named("orders", topicID(1)), named("audit", topicID(2)),
		mdTopic{nil, topicID(3)}, named("noid", [16]byte{})), 12)
	for id, want := range map[[16]byte]string{topicID(1): "orders", topicID(2): "audit", topicID(3): "", topicID(4): "", {}: ""} {
		if got := ids.Name(id); got != want {
			t.Errorf("Name(%x) = %q, want %q", id, got, want)
		}
	}
	if len(ids.names) != 2 {
		t.Errorf("%d names kept, want 2", len(ids.names))
	}
	// A later response renames.
	ids.Learn(metadataFrame(13, named("orders-v2", topicID(1))), 13)
	if got := ids.Name(topicID(1)); got != "orders-v2" {
		t.Errorf("after rename: %q", got)
	}
}

// Frames that are not Metadata responses kproxy can read teach nothing.
func TestTopicIDsLearnIgnoresBadFrames(t *testing.T) {
	ids := NewTopicIDs()
	good := metadataFrame(12, named("orders", topicID(1)))
	ids.Learn(good, 999)              // unknown version
	ids.Learn(good[:len(good)-5], 12) // truncated
	ids.Learn(good[:3], 12)           // shorter than a header
	ids.Learn(nil, 12)
	if len(ids.names) != 0 {
		t.Errorf("learnt %v from bad frames", ids.names)
	}
}

// Names outlive the frame, which the relay reuses.
func TestTopicIDsClonesNames(t *testing.T) {
	ids := NewTopicIDs()
	frame := metadataFrame(12, named("orders", topicID(1)))
	ids.Learn(frame, 12)
	for i := range frame {
		frame[i] = '#'
	}
	if got := ids.Name(topicID(1)); got != "orders" {
		t.Errorf("name %q after the frame was reused", got)
	}
}

// A nil cache (tracing without one) knows no names.
func TestTopicIDsNil(t *testing.T) {
	var ids *TopicIDs
	if got := ids.Name(topicID(1)); got != "" {
		t.Errorf("nil cache: %q", got)
	}
}

// Past maxTopicIDs each new id takes the place of an old one, rather than
// the cache grow without limit or start over (which would turn every id in
// use into an unknown one at once); relearning a known mapping does not
// count as growth.
func TestTopicIDsBound(t *testing.T) {
	ids := NewTopicIDs()
	for i := 0; len(ids.names) < maxTopicIDs; i++ {
		ids.names[[16]byte{0xff, byte(i >> 16), byte(i >> 8), byte(i)}] = fmt.Sprint("t", i)
	}
	known := [16]byte{0xff, 0, 0, 7}
	ids.Learn(metadataFrame(12, named("t7", known)), 12)
	if len(ids.names) != maxTopicIDs {
		t.Fatalf("relearning a known id reset the cache (%d names)", len(ids.names))
	}
	ids.Learn(metadataFrame(12, named("new", topicID(1)), named("newer", topicID(2))), 12)
	if len(ids.names) != maxTopicIDs || ids.Name(topicID(1)) != "new" || ids.Name(topicID(2)) != "newer" {
		t.Errorf("after overflow: %d names, new ones %q %q", len(ids.names), ids.Name(topicID(1)), ids.Name(topicID(2)))
	}
}

// Learn (response goroutines) and Name (request goroutines) run at once.
func TestTopicIDsConcurrent(t *testing.T) {
	ids := NewTopicIDs()
	frame := metadataFrame(12, named("orders", topicID(1)))
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				ids.Learn(frame, 12)
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if n := ids.Name(topicID(1)); n != "" && n != "orders" {
					t.Errorf("name %q", n)
				}
			}
		}()
	}
	wg.Wait()
}
