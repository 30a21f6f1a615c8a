package framing_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// TestParseResponseHeaderEveryKnownVersion checks for every key and version
// kmsg knows that BodyOffset is where kmsg's response body starts, with the
// header version derived from kmsg: v1 when flexible, except ApiVersions,
// which always answers with header v0.
func TestParseResponseHeaderEveryKnownVersion(t *testing.T) {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		resp := kmsg.ResponseForKey(k)
		if resp == nil {
			t.Fatalf("kmsg has no response for key %d", k)
		}
		for v := int16(0); v <= resp.MaxVersion(); v++ {
			resp.SetVersion(v)
			body := resp.AppendTo(nil)
			hv := 0
			if resp.IsFlexible() && k != 18 {
				hv = 1
			}
			for _, tags := range [][]tag{nil, {{id: 3, data: []byte("future")}}} {
				if tags != nil && hv == 0 {
					continue
				}
				name := fmt.Sprintf("%s/v%d/tags%d", kmsg.NameForKey(k), v, len(tags))
				corr := -int32(k)*1000 - int32(v)
				frame := responseFrame(corr, hv, tags, body)
				h, err := framing.ParseResponseHeader(frame, k, v)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if h.CorrelationID != corr || h.BodyOffset != len(frame)-len(body) {
					t.Fatalf("%s: got corr %d offset %d, want %d and %d", name, h.CorrelationID, h.BodyOffset, corr, len(frame)-len(body))
				}
				dec := kmsg.ResponseForKey(k)
				dec.SetVersion(v)
				if err := dec.ReadFrom(frame[h.BodyOffset:]); err != nil {
					t.Fatalf("%s: kmsg cannot decode at BodyOffset: %v", name, err)
				}
				if !bytes.Equal(dec.AppendTo(nil), body) {
					t.Fatalf("%s: body at BodyOffset re-encodes differently", name)
				}
			}
		}
	}
}

// TestParseResponseHeaderApiVersionsIsV0 uses a real flexible ApiVersions
// answer: reading a tag buffer at offset 8 would eat its error code.
func TestParseResponseHeaderApiVersionsIsV0(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 4
	key := kmsg.NewApiVersionsResponseApiKey()
	key.ApiKey, key.MaxVersion = 0, 13
	resp.ApiKeys = append(resp.ApiKeys, key)
	frame := responseFrame(11, 0, nil, resp.AppendTo(nil))
	h, err := framing.ParseResponseHeader(frame, 18, 4)
	if err != nil {
		t.Fatal(err)
	}
	if h.BodyOffset != 8 || h.CorrelationID != 11 {
		t.Fatalf("got %+v, want body at 8", h)
	}
	dec := kmsg.NewPtrApiVersionsResponse()
	dec.Version = 4
	if err := dec.ReadFrom(frame[h.BodyOffset:]); err != nil || len(dec.ApiKeys) != 1 || dec.ApiKeys[0].MaxVersion != 13 {
		t.Fatalf("decode: %v %+v", err, dec.ApiKeys)
	}
}

// TestParseResponseHeaderUnknown reads only the correlation id of a
// response to a request kmsg does not know.
func TestParseResponseHeaderUnknown(t *testing.T) {
	frame := responseFrame(-7, 1, []tag{{id: 1, data: []byte("x")}}, []byte{1, 2, 3})
	for _, kv := range [][2]int16{{kmsg.MaxKey + 1, 0}, {-1, 0}, {0, 100}, {3, -1}} {
		h, err := framing.ParseResponseHeader(frame, kv[0], kv[1])
		if err != nil || h.CorrelationID != -7 || h.BodyOffset != 0 {
			t.Fatalf("key %d v%d: %+v, %v", kv[0], kv[1], h, err)
		}
	}
}

// TestParseResponseHeaderTruncated cuts responses before their body ends.
func TestParseResponseHeaderTruncated(t *testing.T) {
	v0 := responseFrame(1, 0, nil, nil)
	v1 := responseFrame(1, 1, []tag{{id: 2, data: []byte("abc")}, {id: 200, data: make([]byte, 130)}}, nil)
	for n := 0; n < len(v0); n++ {
		if _, err := framing.ParseResponseHeader(v0[:n], 3, 0); !errors.Is(err, framing.ErrMalformed) {
			t.Fatalf("v0 cut to %d: %v", n, err)
		}
	}
	for n := 0; n < len(v1); n++ {
		if _, err := framing.ParseResponseHeader(v1[:n], 3, 12); !errors.Is(err, framing.ErrMalformed) {
			t.Fatalf("v1 cut to %d: %v", n, err)
		}
	}
	if h, err := framing.ParseResponseHeader(v1, 3, 12); err != nil || h.BodyOffset != len(v1) {
		t.Fatalf("whole v1: %+v, %v", h, err)
	}
	// Under 8 bytes is malformed even when the key is unknown.
	if _, err := framing.ParseResponseHeader(v0[:7], -1, 0); !errors.Is(err, framing.ErrMalformed) {
		t.Fatalf("short unknown: %v", err)
	}
}

// TestCorrelationIDPatches checks the in-place rewrites touch exactly the
// four id bytes, which is all the proxy changes in a frame it relays.
func TestCorrelationIDPatches(t *testing.T) {
	req := requestFrame(reqHeader{key: 3, version: 12, corr: 5, clientID: []byte("c"), tags: []tag{{id: 1, data: []byte("t")}}}, 2, []byte{9, 9})
	orig := bytes.Clone(req)
	framing.SetRequestCorrelationID(req, -2147483648)
	h, err := framing.ParseRequestHeader(req)
	if err != nil || h.CorrelationID != -2147483648 || string(h.ClientID) != "c" {
		t.Fatalf("after patch: %+v, %v", h, err)
	}
	if !bytes.Equal(req[:8], orig[:8]) || !bytes.Equal(req[12:], orig[12:]) {
		t.Fatal("request patch touched bytes outside the correlation id")
	}

	resp := responseFrame(5, 1, nil, []byte{7, 7, 7})
	orig = bytes.Clone(resp)
	framing.SetResponseCorrelationID(resp, 0x7fffffff)
	if got := framing.ResponseCorrelationID(resp); got != 0x7fffffff {
		t.Fatalf("ResponseCorrelationID %d", got)
	}
	if got := int32(binary.BigEndian.Uint32(resp[4:])); got != 0x7fffffff {
		t.Fatalf("wire bytes say %d", got)
	}
	if !bytes.Equal(resp[:4], orig[:4]) || !bytes.Equal(resp[8:], orig[8:]) {
		t.Fatal("response patch touched bytes outside the correlation id")
	}
}
