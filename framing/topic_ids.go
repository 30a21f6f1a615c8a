package framing

import (
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// KeyMetadata is the Metadata API key.
const KeyMetadata = int16(kmsg.Metadata)

// maxTopicIDs bounds the cache (about 10 MB at most); past it one learnt
// id makes room for each new one. Clearing the whole cache instead would
// make every client that names topics by id meet UNKNOWN_TOPIC_ID under a
// topic rule at once (see policy), and refresh its metadata together.
const maxTopicIDs = 100_000

// TopicIDs maps topic ids to names. Produce v13+, Fetch v13+ and other
// recent versions name topics only by id, so kproxy learns the names from
// the Metadata responses it relays: a client always asks Metadata before it
// uses an id. An id not learnt (a client that got it elsewhere, or a cache
// that lost it) is UnknownTopic to the rules, which fail closed on it.
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
			for old := range t.names { // any one: map order is random
				delete(t.names, old)
				break
			}
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
