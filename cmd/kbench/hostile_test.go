package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

func decodeProduce(t *testing.T, frame []byte) *kmsg.ProduceRequest {
	t.Helper()
	if got := int(binary.BigEndian.Uint32(frame)); got != len(frame)-4 {
		t.Fatalf("size prefix %d, frame holds %d", got, len(frame)-4)
	}
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = h.APIVersion
	if err := req.ReadFrom(frame[h.BodyOffset:]); err != nil {
		t.Fatal(err)
	}
	return req
}

// The oversize storm's hand-written frame is a valid Produce naming every
// partition it claims.
func TestManyPartitionsFrameDecodes(t *testing.T) {
	req := decodeProduce(t, manyPartitionsFrame("kbench", 1000))
	if len(req.Topics) != 1 || req.Topics[0].Topic != "kbench" || len(req.Topics[0].Partitions) != 1000 || req.Acks != 1 {
		t.Fatalf("decoded %+v", req)
	}
	for i, p := range req.Topics[0].Partitions {
		if p.Partition != int32(i) || p.Records != nil {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
	if n := len(manyPartitionsFrame("kbench", 1_000_000)); n < 6_000_000 || n > 6_100_000 {
		t.Fatalf("a million partitions take %d bytes, want about 6 MB", n)
	}
}

// Each bomb batch is a valid zstd batch (CRC included) that inflates to
// the size asked for, while the frame stays small.
func TestBombFrameInflates(t *testing.T) {
	const batches, inflate = 3, 4 << 20
	frame := bombFrame("kbench", batches, inflate)
	if len(frame) > 64<<10 {
		t.Fatalf("bomb frame is %d bytes", len(frame))
	}
	records := decodeProduce(t, frame).Topics[0].Partitions[0].Records
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	for i := 0; i < batches; i++ {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(records); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		raw := records[:12+b.Length]
		records = records[12+b.Length:]
		if crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); uint32(b.CRC) != crc {
			t.Fatalf("batch %d: CRC %x, computed %x", i, uint32(b.CRC), crc)
		}
		if b.Attributes&7 != 4 || b.NumRecords != 1 {
			t.Fatalf("batch %d: attributes %d, %d records", i, b.Attributes, b.NumRecords)
		}
		plain, err := dec.DecodeAll(b.Records, nil)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if len(plain) < inflate {
			t.Fatalf("batch %d inflates to %d bytes, want at least %d", i, len(plain), inflate)
		}
	}
	if len(records) != 0 {
		t.Fatalf("%d bytes after the batches", len(records))
	}
}

// A short hostile run through an in-process kproxy: every phase measures
// the victims, each attack does something, and the report names them all.
func TestHostileRunReportsEveryPhase(t *testing.T) {
	b := testBroker(t)
	cfg := hostileConfig{Addr: testKproxy(t, b.Addr()), PID: os.Getpid(), Duration: 300 * time.Millisecond,
		Victim:    loadConfig{Conns: 2, Depth: 1, Size: 113, MaxRequests: 1_000_000, Topic: "kbench"},
		BombConns: 1, BombBatches: 4, BombInflate: 1 << 20,
		OversizeConns: 1, OversizeParts: 1000,
		HogConns: 2, HogSize: 8 << 20, HogHold: 1 << 20, HogPause: 100 * time.Millisecond, Budget: 1 << 30}
	phases, err := runHostile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(phases) != 5 {
		t.Fatalf("%d phases, want quiet, bomb, oversize, hog, all", len(phases))
	}
	for _, ph := range phases {
		if ph.VictimErr != nil || ph.Victim.Requests == 0 {
			t.Errorf("%s: victims made %d requests, %v", ph.Name, ph.Victim.Requests, ph.VictimErr)
		}
		for name, tally := range ph.Attack {
			if tally.sent.Load() == 0 {
				t.Errorf("%s: attack %s sent nothing", ph.Name, name)
			}
		}
	}
	var out bytes.Buffer
	printHostile(&out, cfg, phases)
	for _, want := range []string{"quiet", "bomb", "oversize", "hog", "all", "targets:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}
