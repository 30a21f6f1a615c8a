package cluster

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzRewrite feeds Rewrite every address-bearing response kmsg builds at
// every version, truncated and with bytes flipped. It must never panic,
// and a frame it returns without error must never hold an address the
// mapper did not produce.
func FuzzRewrite(f *testing.F) {
	for i, c := range addrCases {
		max := kmsg.ResponseForKey(c.key).MaxVersion()
		for v := int16(0); v <= max; v++ {
			nodes := []int32{1, 2}
			if v < c.from {
				nodes = nil
			}
			frame := frameOf(c.build(v, nodes))
			f.Add(uint8(i), v, frame)
			f.Add(uint8(i), v, frame[:len(frame)/2])
			f.Add(uint8(i), v, frame[:len(frame)-1])
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, v int16, frame []byte) {
		c := addrCases[int(which)%len(addrCases)]
		out, seen, err := Rewrite(frame, c.key, v, testMapper)
		if err != nil {
			return
		}
		if v < c.from {
			if len(seen) != 0 {
				t.Fatalf("v%d has no address field, saw %v", v, seen)
			}
			return
		}
		got, derr := decodeFrame(out, c.key, v)
		if derr != nil {
			// Rewrite passed a frame a client cannot read: it must have
			// been unreadable before (e.g. a partition's tag whose size
			// is right but whose content is not, which the walk steps
			// over by its size), never made so by the rewrite.
			if _, inErr := decodeFrame(frame, c.key, v); inErr == nil {
				t.Fatalf("rebuilt a readable frame into one that does not decode: %v", derr)
			}
			return
		}
		for _, a := range addresses(got) {
			if !strings.HasPrefix(a, proxyHost+":") && !strings.HasPrefix(a, ctrlHost+":") {
				t.Fatalf("%s v%d passed on unmapped address %s", kmsg.NameForKey(c.key), v, a)
			}
		}
	})
}

// TestCorruptedFramesFail: truncating a frame at every length, or making
// its size prefix lie, is an error, never a panic or a partial frame.
func TestCorruptedFramesFail(t *testing.T) {
	for _, c := range addrCases {
		v := kmsg.ResponseForKey(c.key).MaxVersion()
		frame := frameOf(c.build(v, []int32{1, 2}))
		for n := 0; n < len(frame); n++ {
			cut := append([]byte(nil), frame[:n]...)
			if n >= 4 {
				// A consistent size prefix, so the body itself is short.
				cut[0], cut[1], cut[2], cut[3] = 0, 0, byte((n-4)>>8), byte(n-4)
			}
			if out, _, err := Rewrite(cut, c.key, v, testMapper); err == nil {
				t.Fatalf("%s v%d cut at %d: no error, %x", kmsg.NameForKey(c.key), v, n, out)
			}
		}
		lie := append([]byte(nil), frame...)
		lie[3]++
		if _, _, err := Rewrite(lie, c.key, v, testMapper); err == nil {
			t.Fatalf("%s v%d: a wrong size prefix passed", kmsg.NameForKey(c.key), v)
		}
	}
}
