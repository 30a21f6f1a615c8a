package framing

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/topicplant"
)

// learnt is a topic id table that knows every id planted.
func learnt(p topicplant.Planted) *TopicIDs {
	ids := NewTopicIDs()
	for id, name := range p.IDs {
		ids.names[id] = name
	}
	return ids
}

// Every request type kmsg knows that has a topic field must give each
// topic planted there to EachTopic's fn, and be in NamesTopics; a type
// without one must not (except Envelope, which wraps another request).
// A new API, or a new topic field, fails here until EachTopic reads it,
// instead of letting requests past topic rules.
func TestEachTopicCoversEveryRequest(t *testing.T) {
	for _, byID := range []bool{false, true} {
		for k := int16(0); k <= kmsg.MaxKey; k++ {
			if req := kmsg.RequestForKey(k); req != nil {
				checkCovered(t, req, byID)
			}
		}
	}
}

func checkCovered(t *testing.T, req kmsg.Request, byID bool) {
	t.Helper()
	k := req.Key()
	name := kmsg.NameForKey(k)
	p := topicplant.Plant(req, byID)
	if !p.Any() {
		if NamesTopics(k) && !BrokerOnly(k) {
			t.Errorf("%s: no topic field, yet NamesTopics says it names topics", name)
		}
		return
	}
	if !NamesTopics(k) {
		t.Errorf("%s: has topic fields, missing from NamesTopics", name)
	}
	var got []string
	EachTopic(req, learnt(p), func(topic string, _ int32) bool {
		got = append(got, topic)
		return true
	})
	if BrokerOnly(k) {
		if !slices.Equal(got, []string{UnknownTopic}) {
			t.Errorf("%s (broker only): topics %q, want one UnknownTopic", name, got)
		}
		return
	}
	for _, want := range p.Names {
		if !slices.Contains(got, want) {
			t.Errorf("%s (by id %v): topic %q not given by EachTopic (got %q)", name, byID, want, got)
		}
	}
}

// A topic named by an id kproxy has not learnt comes as UnknownTopic,
// never skipped: a rule must see that it cannot tell.
func TestEachTopicUnknownIDs(t *testing.T) {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			continue
		}
		p := topicplant.Plant(req, true)
		if len(p.IDs) == 0 {
			continue
		}
		unknown := 0
		EachTopic(req, NewTopicIDs(), func(topic string, _ int32) bool {
			if topic == UnknownTopic {
				unknown++
			}
			return true
		})
		if unknown == 0 {
			t.Errorf("%s: ids not learnt, yet no UnknownTopic", kmsg.NameForKey(k))
		}
	}
}

// fn returning false stops the walk at once, across lists and levels.
func TestEachTopicStops(t *testing.T) {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			continue
		}
		p := topicplant.Plant(req, false)
		calls := 0
		EachTopic(req, learnt(p), func(string, int32) bool { calls++; return false })
		want := 0
		if p.Any() || BrokerOnly(k) {
			want = 1
		}
		if calls != want {
			t.Errorf("%s: %d calls after fn said stop, want %d", kmsg.NameForKey(k), calls, want)
		}
	}
}
