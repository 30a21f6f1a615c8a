package proxy

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"net"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
	"github.com/kproxy/kproxy/tracing"
)

// zstdBombBatch is a record batch of one traced record whose 16 MiB value
// (zeros) zstd shrinks to ~500 bytes.
func zstdBombBatch(t testing.TB) []byte {
	t.Helper()
	rec := kmsg.Record{Value: make([]byte, 16<<20),
		Headers: []kmsg.Header{{Key: "traceparent", Value: traceparent(producerContext(3))}}}
	body := rec.AppendTo(nil)[1:] // AppendTo writes Length (0) as a one-byte varint
	raw := append(binary.AppendVarint(nil, int64(len(body))), body...)
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(raw)
	w.Close()
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 4, ProducerID: -1, ProducerEpoch: -1,
		FirstSequence: -1, NumRecords: 1, Records: buf.Bytes(), Length: int32(49 + buf.Len())}
	b.CRC = int32(crc32.Checksum(b.AppendTo(nil)[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b.AppendTo(nil)
}

// bombRequest is a Produce to topic "bomb" of n partitions, each holding
// the bomb batch: a frame small enough for the poller that would inflate
// to n x 16 MiB.
func bombRequest(t testing.TB, batch []byte, n int, corr int32) []byte {
	t.Helper()
	req := produceRequest(9, -1, "bomb")
	req.Topics[0].Partitions = nil
	for i := range n {
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition, p.Records = int32(i), batch
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, p)
	}
	frame := encodeRequest(req, corr)
	if len(frame) > relay.InlineMaxBytes {
		t.Fatalf("bomb frame of %d bytes is too large for the poller path", len(frame))
	}
	return frame
}

// With tracing.links.decompress on, a Produce of decompression bombs is
// relayed byte for byte, from the goroutine pool rather than the poller
// (where inflating it stalled every other connection), its span says its
// links are incomplete, and another client is answered while bombs keep
// coming.
func TestTracingDecompressionBombOffThePoller(t *testing.T) {
	tr, flush := newTestTracer(t, func(c *tracing.Config) { c.Links.Decompress = true })
	produced := make(chan []byte, 1)
	up := startFakeUpstream(t, func(c net.Conn, f []byte) {
		if binary.BigEndian.Uint16(f[4:]) == 0 { // Produce
			select {
			case produced <- f:
			default:
			}
		}
		echoResponse(c, f, []byte{0, 0})
	})
	env := startTracedProxy(t, up.addr(), tr)
	batch := zstdBombBatch(t)
	// Under 1 KiB, so netpoll reads it whole, and the runner took it on
	// the poller.
	bomb := bombRequest(t, batch, 1, 7)

	c := dialRaw(t, env.addr)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	// A first request: a connection's first batch can run before its
	// pair is known, in the pool.
	c.Write(apiVersionsV0(1))
	if _, err := readFrame(c); err != nil {
		t.Fatal(err)
	}
	onPollerBefore := batches(env, core.BatchRequests, core.OnPoller)
	if _, err := c.Write(bomb); err != nil {
		t.Fatal(err)
	}
	if f, err := readFrame(c); err != nil || corrOf(f) != 7 {
		t.Fatalf("bomb's response: %v (%d bytes)", err, len(f))
	}
	relayed := <-produced
	want := bytes.Clone(bomb)
	copy(want[8:12], relayed[8:12]) // the correlation id kproxy gives upstream
	if !bytes.Equal(relayed, want) {
		t.Errorf("the broker got %d bytes that differ from the %d the client sent", len(relayed), len(bomb))
	}
	if got := batches(env, core.BatchRequests, core.OnPoller) - onPollerBefore; got != 0 {
		t.Errorf("the bomb's batch ran on the poller (%v batches; pool: %v)", got, batches(env, core.BatchRequests, core.InPool))
	}

	// Bombs keep coming on one connection while another client talks.
	const more = 10
	done := make(chan error, 1)
	go func() {
		for i := range more {
			if _, err := c.Write(bombRequest(t, batch, 25, int32(100+i))); err != nil {
				done <- err
				return
			}
		}
		for range more {
			if _, err := readFrame(c); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	serialRoundTrips(t, env, 50)
	if err := <-done; err != nil {
		t.Fatalf("bombs after the first: %v", err)
	}
	// Requests that are not Produce still go on the poller with
	// decompression on.
	if batches(env, core.BatchRequests, core.OnPoller) == 0 {
		t.Error("no request batch ran on the poller: decompression took every request off it")
	}

	s := findSpan(t, flush(), "Produce bomb")
	wantAttrs(t, s, map[string]string{"kproxy.links_incomplete": "true", "kproxy.links_truncated": "true"})
}
