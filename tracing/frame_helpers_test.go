package tracing

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// requestFrame is req as a client sends it: size, header with client id
// "x", body.
func requestFrame(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("x")).AppendRequest(nil, req, corr)
}

// bodyOf parses a request frame the way the relay does.
func bodyOf(t testing.TB, frame []byte) *framing.Body {
	t.Helper()
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	b := framing.NewBody(h, frame)
	return &b
}

// responseFrame is resp as a broker sends it: size, correlation id, the
// tagged-field buffer when the header is v1, body.
func responseFrame(resp kmsg.Response, corr int32) []byte {
	out := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 0}, uint32(corr))
	if framing.ResponseHeaderVersion(resp.Key(), resp.GetVersion()) == 1 {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// topicID is a deterministic topic id.
func topicID(b byte) [16]byte {
	return [16]byte{0xee, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, b}
}

// metadataV12Frame is a Metadata v12 response naming topics by id.
func metadataV12Frame(topics map[string][16]byte) []byte {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = 12
	for name, id := range topics {
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic, tp.TopicID = kmsg.StringPtr(name), id
		r.Topics = append(r.Topics, tp)
	}
	return responseFrame(r, 1)
}

// learnt is a topic-id cache that has seen a Metadata v12 response.
func learnt(t testing.TB, topics map[string][16]byte) *framing.TopicIDs {
	t.Helper()
	ids := framing.NewTopicIDs()
	ids.Learn(metadataV12Frame(topics), 12)
	for name, id := range topics {
		if got := ids.Name(id); got != name {
			t.Fatalf("Learn: id of %s names %q", name, got)
		}
	}
	return ids
}
