package framing_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/framing"
)

func prefix(size int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(size)) }

// TestCheckSizeAccepts covers the sizes a peer may send, up to and
// including the limit itself.
func TestCheckSizeAccepts(t *testing.T) {
	const max = 100 << 20
	for _, size := range []int32{0, 1, 8, 1 << 20, max - 1, max} {
		got, err := framing.CheckSize(prefix(size), max)
		if err != nil || got != int(size) {
			t.Errorf("CheckSize(%d) = %d, %v", size, got, err)
		}
	}
	// Only the first four bytes are the prefix.
	if got, err := framing.CheckSize(append(prefix(5), 0xff, 0xff), 5); err != nil || got != 5 {
		t.Errorf("prefix with trailing bytes: %d, %v", got, err)
	}
}

// TestCheckSizeRefuses checks refused prefixes report a *SizeError that says
// what went wrong, and names the protocol when the bytes look like one:
// that is what an operator needs when a TLS or HTTP client hits the port.
func TestCheckSizeRefuses(t *testing.T) {
	const max = 100 << 20
	cases := []struct {
		name  string
		p     []byte
		looks string
		text  string
	}{
		{"one over", prefix(max + 1), "", "exceeds limit 104857600"},
		{"negative", prefix(-1), "", "negative frame size -1"},
		{"most negative", prefix(-1 << 31), "", "negative"},
		{"TLS 1.0 ClientHello", []byte{0x16, 0x03, 0x01, 0x02, 0x00}, "TLS ClientHello", "TLS ClientHello"},
		{"TLS 1.2 record", []byte{0x16, 0x03, 0x03, 0x00}, "TLS ClientHello", "TLS ClientHello"},
		{"HTTP GET", []byte("GET / HTTP/1.1\r\n"), "HTTP request", "HTTP request"},
		{"HTTP POST", []byte("POST"), "HTTP request", "HTTP request"},
		{"HTTP/2 preface", []byte("PRI * HTTP/2.0"), "HTTP request", "HTTP request"},
		{"0x16 but not TLS", []byte{0x16, 0x04, 0x01, 0x00}, "", "exceeds limit"},
		{"max int32", prefix(0x7fffffff), "", "2147483647"},
	}
	for _, c := range cases {
		_, err := framing.CheckSize(c.p, max)
		var se *framing.SizeError
		if !errors.As(err, &se) {
			t.Fatalf("%s: err %v, want *SizeError", c.name, err)
		}
		if se.Looks != c.looks || se.Max != max || se.Size != int32(binary.BigEndian.Uint32(c.p)) {
			t.Errorf("%s: %+v", c.name, se)
		}
		if !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %q does not say %q", c.name, err, c.text)
		}
	}
}

// TestCheckSizeSmallLimit checks the limit is the caller's, not a constant.
func TestCheckSizeSmallLimit(t *testing.T) {
	if _, err := framing.CheckSize(prefix(9), 8); err == nil {
		t.Fatal("9 accepted with limit 8")
	}
	if n, err := framing.CheckSize(prefix(8), 8); err != nil || n != 8 {
		t.Fatalf("8 with limit 8: %d, %v", n, err)
	}
}
