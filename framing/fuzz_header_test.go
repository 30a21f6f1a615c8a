package framing_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// FuzzParseRequestHeader feeds arbitrary bytes to the request parser: it
// reads what a client sends before anything is trusted, so it must never
// panic, and whatever it accepts must be self-consistent.
func FuzzParseRequestHeader(f *testing.F) {
	f.Add([]byte{})
	f.Add(requestFrame(reqHeader{key: 7, version: 0, corr: 1}, 0, []byte{0, 0, 0, 1}))
	f.Add(requestFrame(reqHeader{key: 3, version: 1, corr: 2, clientID: []byte("client")}, 1, nil))
	f.Add(requestFrame(reqHeader{key: 3, version: 1, corr: 2}, 1, []byte{0, 0, 0, 0}))
	f.Add(requestFrame(reqHeader{key: 18, version: 3, corr: -3, clientID: []byte{}, tags: []tag{{id: 1, data: []byte("x")}}}, 2, []byte{0, 0, 0}))
	f.Add(requestFrame(reqHeader{key: 0, version: 9, corr: 4, clientID: []byte("p"), tags: []tag{{id: 1 << 20, data: make([]byte, 130)}}}, 2, produceBody(9, 0, nil)))
	f.Add(requestFrame(reqHeader{key: kmsg.MaxKey + 1, version: 0, corr: 5}, 0, nil))
	f.Add([]byte{0, 0, 0, 0, 0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, err := framing.ParseRequestHeader(frame)
		if err != nil {
			if !errors.Is(err, framing.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		checkRequestHeader(t, frame, h)
	})
}

// checkRequestHeader re-derives an accepted header from the bytes.
func checkRequestHeader(t *testing.T, frame []byte, h framing.RequestHeader) {
	if len(frame) < 12 {
		t.Fatalf("accepted %d bytes, shorter than the fixed header", len(frame))
	}
	key, ver := int16(binary.BigEndian.Uint16(frame[4:])), int16(binary.BigEndian.Uint16(frame[6:]))
	if h.APIKey != key || h.APIVersion != ver || h.CorrelationID != int32(binary.BigEndian.Uint32(frame[8:])) {
		t.Fatalf("fixed fields %+v do not match the bytes", h)
	}
	if h.HeaderVersion != framing.RequestHeaderVersion(key, ver) {
		t.Fatalf("header version %d, table says %d", h.HeaderVersion, framing.RequestHeaderVersion(key, ver))
	}
	if h.HeaderVersion < 0 {
		if h.BodyOffset != 0 || h.ClientID != nil {
			t.Fatalf("unknown header parsed past the fixed fields: %+v", h)
		}
		return
	}
	if h.BodyOffset < 12 || h.BodyOffset > len(frame) {
		t.Fatalf("BodyOffset %d outside [12, %d]", h.BodyOffset, len(frame))
	}
	cidEnd := 12
	if h.HeaderVersion >= 1 {
		n := int(int16(binary.BigEndian.Uint16(frame[12:])))
		cidEnd = 14 + max(n, 0)
		switch {
		case n == -1 && h.ClientID != nil:
			t.Fatalf("null client id parsed as %q", h.ClientID)
		case n >= 0 && (len(h.ClientID) != n || cap(h.ClientID) != n):
			t.Fatalf("client id len %d cap %d, prefix says %d", len(h.ClientID), cap(h.ClientID), n)
		case n > 0 && &h.ClientID[0] != &frame[14]:
			t.Fatal("client id does not alias the frame")
		}
	} else if h.ClientID != nil {
		t.Fatal("header v0 has a client id")
	}
	switch {
	case h.HeaderVersion < 2 && h.BodyOffset != cidEnd:
		t.Fatalf("header v%d: BodyOffset %d, want %d", h.HeaderVersion, h.BodyOffset, cidEnd)
	case h.HeaderVersion == 2 && h.BodyOffset <= cidEnd:
		t.Fatalf("header v2: BodyOffset %d leaves no room for tags after %d", h.BodyOffset, cidEnd)
	}
	// The header delimits itself: it parses the same without the body, and
	// not at all with its last byte missing.
	again, err := framing.ParseRequestHeader(frame[:h.BodyOffset])
	if err != nil || again.BodyOffset != h.BodyOffset || string(again.ClientID) != string(h.ClientID) {
		t.Fatalf("header alone: %+v, %v; whole frame gave %+v", again, err, h)
	}
	if _, err := framing.ParseRequestHeader(frame[:h.BodyOffset-1]); err == nil {
		t.Fatalf("header accepted without its last byte (BodyOffset %d)", h.BodyOffset)
	}
}

// FuzzParseResponseHeader does the same for responses, which come from the
// upstream, for any key and version the request side may have recorded.
func FuzzParseResponseHeader(f *testing.F) {
	f.Add([]byte{}, int16(0), int16(0))
	f.Add(responseFrame(1, 0, nil, []byte{0, 0}), int16(18), int16(4))
	f.Add(responseFrame(-1, 1, []tag{{id: 5, data: []byte("abc")}}, []byte{0}), int16(3), int16(12))
	f.Add(responseFrame(2, 1, nil, nil), int16(0), int16(9))
	f.Add(responseFrame(3, 0, nil, nil), int16(-1), int16(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0x80}, int16(3), int16(12))
	f.Fuzz(func(t *testing.T, frame []byte, key, version int16) {
		h, err := framing.ParseResponseHeader(frame, key, version)
		hv := framing.ResponseHeaderVersion(key, version)
		if err != nil {
			if !errors.Is(err, framing.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if len(frame) >= 8 && hv != 1 {
				t.Fatalf("header v%d of %d bytes refused: %v", hv, len(frame), err)
			}
			return
		}
		if len(frame) < 8 || h.CorrelationID != int32(binary.BigEndian.Uint32(frame[4:])) {
			t.Fatalf("accepted %+v from %x", h, frame)
		}
		switch hv {
		case -1:
			if h.BodyOffset != 0 {
				t.Fatalf("unknown version: BodyOffset %d", h.BodyOffset)
			}
		case 0:
			if h.BodyOffset != 8 {
				t.Fatalf("header v0: BodyOffset %d", h.BodyOffset)
			}
		case 1:
			if h.BodyOffset < 9 || h.BodyOffset > len(frame) {
				t.Fatalf("header v1: BodyOffset %d outside [9, %d]", h.BodyOffset, len(frame))
			}
			if again, err := framing.ParseResponseHeader(frame[:h.BodyOffset], key, version); err != nil || again != h {
				t.Fatalf("header alone: %+v, %v", again, err)
			}
			if _, err := framing.ParseResponseHeader(frame[:h.BodyOffset-1], key, version); err == nil {
				t.Fatal("header accepted without its last byte")
			}
		default:
			t.Fatalf("header version %d", hv)
		}
	})
}
