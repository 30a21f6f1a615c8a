package tracing

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/internal/topicplant"
)

// A span names every topic a request names, for every request type kmsg
// knows that has a topic field (by name or by a learnt id): a new API, or
// a new topic field, fails here until the spans see it. Broker-only APIs
// are not read (framing.BrokerOnly).
func TestRequestFactsNameEveryTopic(t *testing.T) {
	for _, byID := range []bool{false, true} {
		for k := int16(0); k <= kmsg.MaxKey; k++ {
			req := kmsg.RequestForKey(k)
			if req == nil || framing.BrokerOnly(k) {
				continue
			}
			p := topicplant.Plant(req, byID)
			byName := map[string][16]byte{}
			for id, name := range p.IDs {
				byName[name] = id
			}
			f := requestFacts(req, learnt(t, byName))
			for _, want := range p.Names {
				if !slices.Contains(f.topics, want) {
					t.Errorf("%s (by id %v): span topics %q lack %q", kmsg.NameForKey(k), byID, f.topics, want)
				}
			}
		}
	}
}
