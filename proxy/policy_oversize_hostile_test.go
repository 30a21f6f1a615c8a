package proxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// wideProduce is a Produce v9 frame (flexible) naming n partitions of one
// topic, each with records of recBytes (null when 0): with null records,
// 6 bytes a partition, so 1M partitions make a 6 MB frame. Built by hand;
// kmsg would hold 1M structs to encode it.
func wideProduce(corr int32, topic string, n, recBytes int) []byte {
	b := make([]byte, 4, 64+(8+recBytes)*n)
	b = binary.BigEndian.AppendUint16(b, 0) // Produce
	b = binary.BigEndian.AppendUint16(b, 9)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "hog"...)
	b = append(b, 0)                             // header tags
	b = append(b, 0)                             // transactional_id: null
	b = binary.BigEndian.AppendUint16(b, 0xFFFF) // acks -1
	b = binary.BigEndian.AppendUint32(b, 1000)   // timeout
	b = binary.AppendUvarint(b, 2)               // one topic
	b = binary.AppendUvarint(b, uint64(len(topic)+1))
	b = append(b, topic...)
	b = binary.AppendUvarint(b, uint64(n+1))
	for p := 0; p < n; p++ {
		b = binary.BigEndian.AppendUint32(b, uint32(p))
		if recBytes == 0 {
			b = append(b, 0) // null
		} else {
			b = binary.AppendUvarint(b, uint64(recBytes+1))
			b = append(b, make([]byte, recBytes)...)
		}
		b = append(b, 0) // no tags
	}
	b = append(b, 0, 0) // topic tags, request tags
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// allocated is how many heap bytes the process allocated while f ran,
// counting garbage: an upper bound on what f made the heap grow by.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// refusal is what a client saw after sending a refused request: an answer
// (its size and, when small enough to keep, the frame) or a close.
type refusal struct {
	closed bool
	size   int
	frame  []byte
}

// awaitRefusal reads kproxy's answer to the request just written on c,
// dropping a large one as it arrives so the test itself holds nothing.
func awaitRefusal(t testing.TB, c net.Conn) refusal {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var p [4]byte
	if _, err := io.ReadFull(c, p[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("neither answered nor closed")
		}
		return refusal{closed: true}
	}
	n := int(binary.BigEndian.Uint32(p[:]))
	if n > 1<<20 {
		if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
			t.Fatalf("answer of %d bytes cut short: %v", n, err)
		}
		return refusal{size: n}
	}
	f := make([]byte, 4+n)
	copy(f, p[:])
	if _, err := io.ReadFull(c, f[4:]); err != nil {
		t.Fatalf("answer of %d bytes cut short: %v", n, err)
	}
	return refusal{size: n, frame: f}
}

// A 6 MB Produce naming 1M partitions, over a 1 MiB max_request_bytes
// rule, is refused at a cost that does not grow with the partitions it
// names (the old refusal allocated hundreds of MB for it), and another
// client of the same kproxy is served as before.
func TestPolicyOversizeWideProduceBounded(t *testing.T) {
	env := startKfake(t, nil)
	env.srv.SetPolicies(maxRequestRule(1 << 20))
	other := dialRaw(t, env.addr)
	other.Write(apiVersionsV0(1))
	other.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := readFrame(other); err != nil {
		t.Fatal(err)
	}
	frame := wideProduce(7, "big", 1_000_000, 0)
	hog := dialRaw(t, env.addr)
	var got refusal
	used := allocated(func() {
		go hog.Write(frame) // fails once kproxy closes
		got = awaitRefusal(t, hog)
	})
	t.Logf("refusing %d bytes naming 1M partitions allocated %d KiB; client saw %+v", len(frame), used>>10,
		refusal{closed: got.closed, size: got.size})
	// The frame itself passes through netpoll's input buffer (bounded
	// elsewhere); the refusal must add no more than a few MB to it.
	if limit := uint64(len(frame)) + 16<<20; used > limit {
		t.Fatalf("refusal allocated %d MiB, want under %d MiB", used>>20, limit>>20)
	}
	if got.closed {
		waitFor(t, 5*time.Second, "the close's log line", func() bool {
			return env.logs.contains("naming more partitions than kproxy keeps to answer")
		})
	} else {
		if got.frame == nil || corrOf(got.frame) != 7 {
			t.Fatalf("answer of %d bytes, not a close or kproxy's answer to request 7", got.size)
		}
		resp := decodeResponse(t, got.frame, 0, 9).(*kmsg.ProduceResponse)
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if p.ErrorCode != 10 {
					t.Fatalf("partition %d: error %d, want MESSAGE_TOO_LARGE", p.Partition, p.ErrorCode)
				}
			}
		}
	}
	other.Write(apiVersionsV0(2))
	other.SetReadDeadline(time.Now().Add(5 * time.Second))
	if f, err := readFrame(other); err != nil || corrOf(f) != 2 {
		t.Fatalf("other client after the refusal: %v", err)
	}
}

// A Produce over the limit that names many partitions, but fewer than
// kproxy keeps, is answered in full: MESSAGE_TOO_LARGE on each of them,
// at a cost of a few MB.
func TestPolicyOversizeManyPartitionsAnswered(t *testing.T) {
	env := startKfake(t, nil)
	env.srv.SetPolicies(maxRequestRule(1 << 20))
	const n = 10_000
	frame := wideProduce(8, "big", n, 120)
	c := dialRaw(t, env.addr)
	var got refusal
	used := allocated(func() {
		go c.Write(frame)
		got = awaitRefusal(t, c)
	})
	t.Logf("refusing %d bytes naming %d partitions allocated %d KiB; answer of %d bytes", len(frame), n, used>>10, got.size)
	if got.closed || got.frame == nil || corrOf(got.frame) != 8 {
		t.Fatalf("no answer to request 8: %+v", refusal{closed: got.closed, size: got.size})
	}
	resp := decodeResponse(t, got.frame, 0, 9).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "big" || len(resp.Topics[0].Partitions) != n {
		t.Fatalf("answer names %d topics, want big with %d partitions", len(resp.Topics), n)
	}
	for i, p := range resp.Topics[0].Partitions {
		if p.Partition != int32(i) || p.ErrorCode != 10 {
			t.Fatalf("answer's partition %d: %d with error %d, want %d with MESSAGE_TOO_LARGE", i, p.Partition, p.ErrorCode, i)
		}
	}
	if limit := uint64(len(frame)) + 16<<20; used > limit {
		t.Fatalf("refusal allocated %d MiB, want under %d MiB", used>>20, limit>>20)
	}
	c.Write(apiVersionsV0(9))
	if f, err := readFrame(c); err != nil || corrOf(f) != 9 {
		t.Fatalf("request after the refused one: %v", err)
	}
}
