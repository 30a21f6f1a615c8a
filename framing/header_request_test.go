package framing_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// wantReqHeaderVersion derives the request header version from kmsg alone,
// so the parser's own version table is checked, not reused.
func wantReqHeaderVersion(req kmsg.Request) int8 {
	switch {
	case req.Key() == 7 && req.GetVersion() == 0:
		return 0
	case req.IsFlexible():
		return 2
	}
	return 1
}

// TestParseRequestHeaderEveryKnownVersion proves that for every key and
// version kmsg knows, the header version is right and BodyOffset is exactly
// where kmsg's body starts: the body decodes there and re-encodes to the
// same bytes.
func TestParseRequestHeaderEveryKnownVersion(t *testing.T) {
	clientIDs := map[string][]byte{"null": nil, "empty": {}, "set": []byte("kproxy-test")}
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		req := kmsg.RequestForKey(k)
		if req == nil {
			t.Fatalf("kmsg has no request for key %d", k)
		}
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			body := req.AppendTo(nil)
			hv := wantReqHeaderVersion(req)
			for cname, cid := range clientIDs {
				for _, tags := range [][]tag{nil, {{id: 7, data: []byte("unknown")}}} {
					if tags != nil && hv < 2 {
						continue
					}
					corr := int32(k)<<16 | int32(v)<<4 ^ -0x12345
					frame := requestFrame(reqHeader{key: k, version: v, corr: corr, clientID: cid, tags: tags}, int(hv), body)
					name := fmt.Sprintf("%s/v%d/%s/tags%d", kmsg.NameForKey(k), v, cname, len(tags))
					checkKnownRequest(t, name, frame, k, v, corr, hv, cid, len(body))
				}
			}
		}
	}
}

func checkKnownRequest(t *testing.T, name string, frame []byte, k, v int16, corr int32, hv int8, cid []byte, bodyLen int) {
	t.Helper()
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if h.APIKey != k || h.APIVersion != v || h.CorrelationID != corr || h.HeaderVersion != hv {
		t.Fatalf("%s: got key %d v%d corr %d hv %d, want %d v%d corr %d hv %d",
			name, h.APIKey, h.APIVersion, h.CorrelationID, h.HeaderVersion, k, v, corr, hv)
	}
	if want := len(frame) - bodyLen; h.BodyOffset != want {
		t.Fatalf("%s: BodyOffset %d, want %d", name, h.BodyOffset, want)
	}
	if hv == 0 || cid == nil {
		if h.ClientID != nil {
			t.Fatalf("%s: ClientID %q, want nil", name, h.ClientID)
		}
	} else if h.ClientID == nil || !bytes.Equal(h.ClientID, cid) {
		t.Fatalf("%s: ClientID %q, want %q", name, h.ClientID, cid)
	}
	dec := kmsg.RequestForKey(k)
	dec.SetVersion(v)
	if err := dec.ReadFrom(frame[h.BodyOffset:]); err != nil {
		t.Fatalf("%s: kmsg cannot decode the body at BodyOffset %d: %v", name, h.BodyOffset, err)
	}
	if re := dec.AppendTo(nil); !bytes.Equal(re, frame[h.BodyOffset:]) {
		t.Fatalf("%s: body at BodyOffset re-encodes differently", name)
	}
}

// TestParseRequestHeaderMatchesKmsgFormatter parses frames written by
// kmsg's own request formatter, a second independent encoder of headers.
// Its formatter drops the body for ControlledShutdown v0, so that one is
// covered by the hand-built frames only.
func TestParseRequestHeaderMatchesKmsgFormatter(t *testing.T) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("franz"))
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		req := kmsg.RequestForKey(k)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			if k == 7 && v == 0 {
				continue
			}
			req.SetVersion(v)
			frame := f.AppendRequest(nil, req, -42)
			h, err := framing.ParseRequestHeader(frame)
			if err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(k), v, err)
			}
			if h.CorrelationID != -42 || string(h.ClientID) != "franz" ||
				h.BodyOffset != len(frame)-len(req.AppendTo(nil)) {
				t.Fatalf("%s v%d: parsed %+v from a kmsg-formatted frame", kmsg.NameForKey(k), v, h)
			}
		}
	}
}

// TestParseRequestHeaderV0 covers the one header without a client id.
func TestParseRequestHeaderV0(t *testing.T) {
	req := kmsg.NewPtrControlledShutdownRequest()
	req.Version, req.BrokerID = 0, 3
	frame := requestFrame(reqHeader{key: 7, version: 0, corr: 9}, 0, req.AppendTo(nil))
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.HeaderVersion != 0 || h.BodyOffset != 12 || h.ClientID != nil || h.CorrelationID != 9 {
		t.Fatalf("got %+v", h)
	}
	dec := kmsg.NewPtrControlledShutdownRequest()
	if err := dec.ReadFrom(frame[h.BodyOffset:]); err != nil || dec.BrokerID != 3 {
		t.Fatalf("body: %v, broker %d", err, dec.BrokerID)
	}
}

// TestParseRequestHeaderClientID checks null, empty and set client ids in
// header v1 and v2, and that a set one aliases the frame without letting an
// append run into the body.
func TestParseRequestHeaderClientID(t *testing.T) {
	for _, v := range []int16{4 /* header v1 */, 12 /* header v2 */} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("orders")
		req.Topics = append(req.Topics, topic)
		body := req.AppendTo(nil)
		for _, cid := range [][]byte{nil, {}, []byte("c"), bytes.Repeat([]byte("x"), 300)} {
			frame := requestFrame(reqHeader{key: 3, version: v, corr: 1, clientID: cid}, int(framing.RequestHeaderVersion(3, v)), body)
			h, err := framing.ParseRequestHeader(frame)
			if err != nil {
				t.Fatalf("v%d client id %q: %v", v, cid, err)
			}
			switch {
			case cid == nil && h.ClientID != nil:
				t.Fatalf("v%d: null client id parsed as %q", v, h.ClientID)
			case cid != nil && (h.ClientID == nil || !bytes.Equal(h.ClientID, cid)):
				t.Fatalf("v%d: client id %q parsed as %q", v, cid, h.ClientID)
			case cap(h.ClientID) != len(h.ClientID):
				t.Fatalf("v%d: client id cap %d > len %d: an append would overwrite the body", v, cap(h.ClientID), len(h.ClientID))
			}
			if len(cid) > 0 {
				frame[14] ^= 0xff
				if h.ClientID[0] != frame[14] {
					t.Fatalf("v%d: ClientID does not alias the frame", v)
				}
			}
			if h.BodyOffset != len(frame)-len(body) {
				t.Fatalf("v%d: BodyOffset %d, want %d", v, h.BodyOffset, len(frame)-len(body))
			}
		}
	}
}

// TestParseRequestHeaderSkipsUnknownTags feeds header tags no Kafka version
// defines yet; they must be skipped by their declared size.
func TestParseRequestHeaderSkipsUnknownTags(t *testing.T) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kproxy", "1.0"
	body := req.AppendTo(nil)
	cases := map[string][]tag{
		"none":        nil,
		"empty data":  {{id: 0}},
		"several":     {{id: 0, data: []byte{1}}, {id: 1, data: []byte("ab")}, {id: 2, data: []byte{0, 0, 0}}},
		"big tag id":  {{id: 1 << 40, data: []byte("x")}},
		"long data":   {{id: 5, data: bytes.Repeat([]byte{0x80}, 300)}},
		"varint-like": {{id: 9, data: []byte{0xff, 0xff, 0xff}}},
	}
	for name, tags := range cases {
		frame := requestFrame(reqHeader{key: 18, version: 3, corr: 77, clientID: []byte("cid"), tags: tags}, 2, body)
		h, err := framing.ParseRequestHeader(frame)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h.BodyOffset != len(frame)-len(body) {
			t.Fatalf("%s: BodyOffset %d, want %d", name, h.BodyOffset, len(frame)-len(body))
		}
		dec := kmsg.NewPtrApiVersionsRequest()
		dec.Version = 3
		if err := dec.ReadFrom(frame[h.BodyOffset:]); err != nil || dec.ClientSoftwareName != "kproxy" {
			t.Fatalf("%s: body decode: %v (%q)", name, err, dec.ClientSoftwareName)
		}
	}
}

// TestParseRequestHeaderUnknown checks that a key or version kmsg does not
// know is not parsed past the fixed fields, and is not an error: such frames
// are relayed opaquely.
func TestParseRequestHeaderUnknown(t *testing.T) {
	produceMax := kmsg.NewPtrProduceRequest().MaxVersion()
	cases := []struct{ key, version int16 }{
		{kmsg.MaxKey + 1, 0},
		{0x7fff, 3},
		{-1, 0},
		{0, produceMax + 1},
		{0, -1},
		{17, 2},
		{7, -1},
	}
	for _, c := range cases {
		// Only the fixed 12 bytes: an unknown header must not need more.
		frame := withSize(appendReqHeader(nil, reqHeader{key: c.key, version: c.version, corr: -5}, 0))
		// And with bytes after that would be a malformed client id if read.
		long := append(append([]byte(nil), frame...), 0x80, 0x00, 1)
		for _, f := range [][]byte{frame, long} {
			h, err := framing.ParseRequestHeader(f)
			if err != nil {
				t.Fatalf("key %d v%d: %v", c.key, c.version, err)
			}
			if h.HeaderVersion != -1 || h.BodyOffset != 0 || h.ClientID != nil {
				t.Fatalf("key %d v%d: got %+v, want header version -1, no body offset", c.key, c.version, h)
			}
			if h.APIKey != c.key || h.APIVersion != c.version || h.CorrelationID != -5 {
				t.Fatalf("key %d v%d: fixed fields read as %+v", c.key, c.version, h)
			}
		}
	}
}

// TestParseRequestHeaderTruncated cuts valid frames of each header version
// at every byte before the body: every cut must be ErrMalformed.
func TestParseRequestHeaderTruncated(t *testing.T) {
	frames := map[string][]byte{
		"v0":            requestFrame(reqHeader{key: 7, version: 0, corr: 1}, 0, nil),
		"v1 null":       requestFrame(reqHeader{key: 3, version: 1, corr: 1}, 1, nil),
		"v1 set":        requestFrame(reqHeader{key: 3, version: 1, corr: 1, clientID: []byte("client")}, 1, nil),
		"v2 no tags":    requestFrame(reqHeader{key: 3, version: 12, corr: 1, clientID: []byte("client")}, 2, nil),
		"v2 tags":       requestFrame(reqHeader{key: 3, version: 12, corr: 1, clientID: []byte("c"), tags: []tag{{id: 1, data: []byte("abc")}, {id: 300, data: make([]byte, 200)}}}, 2, nil),
		"v2 empty cid":  requestFrame(reqHeader{key: 18, version: 4, corr: 1, clientID: []byte{}}, 2, nil),
		"v2 null+tags":  requestFrame(reqHeader{key: 18, version: 4, corr: 1, tags: []tag{{id: 0}}}, 2, nil),
		"v2 zero-width": requestFrame(reqHeader{key: 0, version: 9, corr: 1, tags: []tag{{id: 1}, {id: 2}}}, 2, nil),
	}
	for name, frame := range frames {
		h, err := framing.ParseRequestHeader(frame)
		if err != nil || h.BodyOffset != len(frame) {
			t.Fatalf("%s: whole header: %+v, %v", name, h, err)
		}
		for n := 0; n < len(frame); n++ {
			_, err := framing.ParseRequestHeader(frame[:n])
			if !errors.Is(err, framing.ErrMalformed) {
				t.Fatalf("%s cut to %d of %d bytes: err %v, want ErrMalformed", name, n, len(frame), err)
			}
		}
	}
}

// TestParseRequestHeaderMalformed covers lengths and varints that lie.
func TestParseRequestHeaderMalformed(t *testing.T) {
	fixed := func(key, version int16) []byte {
		return withSize(appendReqHeader(nil, reqHeader{key: key, version: version, corr: 1}, 0))
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := map[string][]byte{
		"client id length -2":      cat(fixed(3, 1), []byte{0xff, 0xfe, 'a', 'b'}),
		"client id length minimum": cat(fixed(3, 1), []byte{0x80, 0x00, 'a'}),
		"client id past end":       cat(fixed(3, 1), []byte{0x00, 0x05, 'a', 'b'}),
		"tag count missing":        cat(fixed(3, 12), []byte{0x00, 0x00}),
		"tag count overflows":      cat(fixed(3, 12), []byte{0xff, 0xff}, bytes.Repeat([]byte{0xff}, 10), []byte{1}),
		"tag count unterminated":   cat(fixed(3, 12), []byte{0xff, 0xff, 0x80, 0x80}),
		"tag count exceeds fields": cat(fixed(3, 12), []byte{0xff, 0xff, 0x05, 0x01, 0x00}),
		"tag size past end":        cat(fixed(3, 12), []byte{0xff, 0xff, 0x01, 0x01, 0x09, 'a'}),
		"tag size huge":            cat(fixed(3, 12), []byte{0xff, 0xff, 0x01, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}),
		"tag id unterminated":      cat(fixed(3, 12), []byte{0xff, 0xff, 0x01, 0x81}),
	}
	for name, frame := range cases {
		_, err := framing.ParseRequestHeader(frame)
		if !errors.Is(err, framing.ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}
