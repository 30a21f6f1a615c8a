package framing

import (
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KeyMetadata is the Metadata API key.
const KeyMetadata int16 = 3

// maxTopicIDs bounds the cache; past it the cache starts over.
const maxTopicIDs = 100_000

// TopicIDs maps topic ids to names. Produce v13+, Fetch v13+ and other
// recent versions name topics only by id, so kproxy learns the names from
// the Metadata responses it relays: a client always asks Metadata before it
// uses an id.
type TopicIDs struct {
	mu    sync.RWMutex
	names map[[16]byte]string
}

// NewTopicIDs returns an empty cache.
func NewTopicIDs() *TopicIDs { return &TopicIDs{names: make(map[[16]byte]string)} }

// Learn records the ids in a Metadata response frame.
func (t *TopicIDs) Learn(frame []byte, version int16) {
	if t == nil {
		return
	}
	resp, err := DecodeResponse(frame, KeyMetadata, version)
	if err != nil || resp == nil {
		return
	}
	md := resp.(*kmsg.MetadataResponse)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.names == nil {
		t.names = make(map[[16]byte]string)
	}
	for _, topic := range md.Topics {
		if topic.Topic == nil || topic.TopicID == ([16]byte{}) {
			continue
		}
		if t.names[topic.TopicID] == *topic.Topic {
			continue
		}
		if len(t.names) >= maxTopicIDs {
			clear(t.names)
		}
		t.names[topic.TopicID] = strings.Clone(*topic.Topic) // the frame is reused
	}
}

// Name returns the topic name for id, or "" when not known.
func (t *TopicIDs) Name(id [16]byte) string {
	if t == nil || id == ([16]byte{}) {
		return ""
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.names[id]
}
