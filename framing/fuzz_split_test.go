package framing_test

import (
	"bytes"
	"testing"

	"github.com/cloudwego/netpoll"

	"github.com/kproxy/kproxy/framing"
)

// framesFrom turns fuzz input into up to 16 whole frames. Each length byte
// gives a payload length; bytes 0xf8..0xff stand for 2.5..20 KB payloads, so
// frames also span netpoll's buffer nodes. Payload bytes come from the input
// and are padded with a pattern.
func framesFrom(data []byte) [][]byte {
	var frames [][]byte
	total := 0
	for i := 0; i < len(data) && len(frames) < 16 && total < 64<<10; {
		l := int(data[i])
		i++
		if l >= 0xf8 {
			l = (l - 0xf7) * 2500
		}
		p := make([]byte, l)
		for j := range p {
			if i+j < len(data) {
				p[j] = data[i+j]
			} else {
				p[j] = byte(j*7 + l)
			}
		}
		i += min(l, len(data)-i)
		frames = append(frames, withSize(p))
		total += 4 + l
	}
	return frames
}

// splitter feeds chunks of a stream into a LinkBuffer and drains whole
// frames after each, checking each against the frames the stream was built
// from: a partial, merged or reordered frame shows up as a mismatch.
type splitter struct {
	t      *testing.T
	frames [][]byte
	lb     *netpoll.LinkBuffer
	got    int
}

const splitMax = 1 << 20

func (s *splitter) run(chunks [][]byte) {
	s.lb, s.got = netpoll.NewLinkBuffer(), 0
	defer s.lb.Close()
	fed := 0
	for _, c := range chunks {
		feed(s.t, s.lb, c)
		fed += len(c)
		s.drain(fed)
	}
	if s.got != len(s.frames) || s.lb.Len() != 0 {
		s.t.Fatalf("drained %d of %d frames, %d bytes left", s.got, len(s.frames), s.lb.Len())
	}
}

func (s *splitter) drain(fed int) {
	t := s.t
	for {
		n, ok, err := framing.Buffered(s.lb, splitMax)
		if err != nil {
			t.Fatalf("after %d bytes, frame %d: %v", fed, s.got, err)
		}
		if !ok {
			if s.got < len(s.frames) && s.lb.Len() >= framing.SizeLen && n != len(s.frames[s.got]) {
				t.Fatalf("frame %d: Buffered says %d bytes, want %d", s.got, n, len(s.frames[s.got]))
			}
			if s.lb.Len() >= n && s.lb.Len() >= framing.SizeLen {
				t.Fatalf("frame %d: whole frame buffered but not reported", s.got)
			}
			break
		}
		if s.got == len(s.frames) {
			t.Fatalf("after %d bytes: a frame beyond the %d sent", fed, len(s.frames))
		}
		frame, err := framing.Next(s.lb, splitMax)
		if err != nil || len(frame) != n || !bytes.Equal(frame, s.frames[s.got]) {
			t.Fatalf("after %d bytes, frame %d: got %d bytes (%v), want %d", fed, s.got, len(frame), err, len(s.frames[s.got]))
		}
		s.got++
	}
	if err := s.lb.Release(); err != nil {
		t.Fatal(err)
	}
}

// chunked cuts stream into pieces whose sizes cycle through sizes.
func chunked(stream []byte, sizes ...int) [][]byte {
	var out [][]byte
	for i, k := 0, 0; i < len(stream); k++ {
		n := min(max(sizes[k%len(sizes)], 1), len(stream)-i)
		out = append(out, stream[i:i+n])
		i += n
	}
	return out
}

// splitPoints is every offset of a short stream; for a long one, the
// offsets around each frame boundary and an even spread in between.
func splitPoints(frames [][]byte, stream []byte) []int {
	if len(stream) <= 1024 {
		pts := make([]int, len(stream)+1)
		for i := range pts {
			pts[i] = i
		}
		return pts
	}
	var pts []int
	for off, i := 0, 0; i <= len(frames); i++ {
		for d := -5; d <= 5; d++ {
			if p := off + d; p >= 0 && p <= len(stream) {
				pts = append(pts, p)
			}
		}
		if i < len(frames) {
			off += len(frames[i])
		}
	}
	for p := 0; p <= len(stream); p += len(stream)/256 + 1 {
		pts = append(pts, p)
	}
	return pts
}

// FuzzFrameSplit checks that however TCP cuts a stream of frames, Buffered
// and Next hand on exactly the frames that were sent, whole and in order.
func FuzzFrameSplit(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add([]byte{0}, uint8(1))
	f.Add([]byte{3, 'a', 'b', 'c', 0, 1, 'x'}, uint8(2))
	f.Add([]byte{12, 0, 3, 0, 1, 0, 0, 0, 9, 0xff, 0xff, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'}, uint8(6))
	f.Add([]byte{0xf8, 1, 2, 3, 2, 'o', 'k', 0xfb, 9}, uint8(200))
	f.Add(bytes.Repeat([]byte{1, 0xaa}, 40), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		frames := framesFrom(data)
		stream := bytes.Join(frames, nil)
		s := &splitter{t: t, frames: frames}
		s.run([][]byte{stream})
		for _, p := range splitPoints(frames, stream) {
			s.run([][]byte{stream[:p], stream[p:]})
		}
		s.run(chunked(stream, 1))
		s.run(chunked(stream, int(step)+1))
		irregular := []int{int(step) + 1}
		for _, b := range data[:min(len(data), 16)] {
			irregular = append(irregular, int(b)%97+1)
		}
		s.run(chunked(stream, irregular...))
	})
}
