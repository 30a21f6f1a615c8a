package framing_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// produceBody encodes a Produce request body with kmsg. A topic with one
// partition follows acks, so a parser that reads the wrong offset sees
// other bytes.
func produceBody(version, acks int16, txn *string) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TransactionID, req.TimeoutMillis = version, acks, txn, 0x1234
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "payments"
	part := kmsg.NewProduceRequestTopicPartition()
	part.Partition, part.Records = 2, []byte{0xde, 0xad}
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	return req.AppendTo(nil)
}

// TestProduceAcksEveryVersion reads acks from kmsg-encoded Produce requests
// of every version, behind a real header, with each transactional id shape.
// acks=0 is the one that decides whether a response will ever come.
func TestProduceAcksEveryVersion(t *testing.T) {
	long := strings.Repeat("t", 300) // a two-byte compact length
	txns := map[string]*string{"null": nil, "empty": kmsg.StringPtr(""), "set": kmsg.StringPtr("txn-1"), "long": &long}
	maxV := kmsg.NewPtrProduceRequest().MaxVersion()
	for v := int16(0); v <= maxV; v++ {
		for _, acks := range []int16{0, 1, -1} {
			for tname, txn := range txns {
				if v < 3 && txn != nil {
					continue // no transactional_id field before v3
				}
				name := fmt.Sprintf("v%d/acks%d/txn-%s", v, acks, tname)
				body := produceBody(v, acks, txn)
				frame := requestFrame(reqHeader{key: 0, version: v, corr: 1, clientID: []byte("p")}, int(framing.RequestHeaderVersion(0, v)), body)
				h, err := framing.ParseRequestHeader(frame)
				if err != nil {
					t.Fatalf("%s: header: %v", name, err)
				}
				got, err := framing.ProduceAcks(frame[h.BodyOffset:], v)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got != acks {
					t.Fatalf("%s: acks %d, want %d", name, got, acks)
				}
			}
		}
	}
}

// TestProduceAcksTruncated cuts bodies of every version before acks ends:
// each cut must be an error, never a guess.
func TestProduceAcksTruncated(t *testing.T) {
	maxV := kmsg.NewPtrProduceRequest().MaxVersion()
	for v := int16(0); v <= maxV; v++ {
		for _, txn := range []*string{nil, kmsg.StringPtr(""), kmsg.StringPtr(strings.Repeat("x", 200))} {
			if v < 3 && txn != nil {
				continue
			}
			body := produceBody(v, -1, txn)
			end := acksEnd(t, body, v, txn)
			for n := 0; n < end; n++ {
				if _, err := framing.ProduceAcks(body[:n], v); !errors.Is(err, framing.ErrMalformed) {
					t.Fatalf("v%d cut to %d (acks end at %d): err %v", v, n, end, err)
				}
			}
			if a, err := framing.ProduceAcks(body[:end], v); err != nil || a != -1 {
				t.Fatalf("v%d cut right after acks: %d, %v", v, a, err)
			}
		}
	}
}

// acksEnd is where acks ends in a body, computed from the layout and checked
// against the encoded bytes.
func acksEnd(t *testing.T, body []byte, v int16, txn *string) int {
	t.Helper()
	off := 0
	if v >= 3 {
		n := 0
		if txn != nil {
			n = len(*txn)
		}
		if v >= 9 {
			l := uint64(0)
			if txn != nil {
				l = uint64(n) + 1
			}
			off = len(binary.AppendUvarint(nil, l)) + n
		} else {
			off = 2 + n
		}
	}
	if int16(binary.BigEndian.Uint16(body[off:])) != -1 {
		t.Fatalf("v%d: layout assumption wrong, acks not at %d", v, off)
	}
	return off + 2
}

// TestProduceAcksMalformedLengths covers transactional id lengths that lie.
func TestProduceAcksMalformedLengths(t *testing.T) {
	cases := []struct {
		name    string
		version int16
		body    []byte
	}{
		{"classic length -2", 3, []byte{0xff, 0xfe, 0x00, 0x01}},
		{"classic length past end", 8, []byte{0x00, 0x10, 'a', 0x00, 0x01}},
		{"compact length past end", 9, []byte{0x10, 'a', 0x00, 0x01}},
		{"compact length huge", 9, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"compact length overflows", 9, append(make([]byte, 0, 11), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{"compact length unterminated", 10, []byte{0x80, 0x80}},
		{"empty", 0, nil},
		{"one byte", 2, []byte{0x00}},
	}
	for _, c := range cases {
		if a, err := framing.ProduceAcks(c.body, c.version); !errors.Is(err, framing.ErrMalformed) {
			t.Errorf("%s: acks %d, err %v, want ErrMalformed", c.name, a, err)
		}
	}
}
