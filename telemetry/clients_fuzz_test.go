package telemetry

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/records"
)

// FuzzPush: whatever a client pushes, in whatever codec, the answer is
// one of the codes a broker gives and nothing panics.
func FuzzPush(f *testing.F) {
	raw := []byte("\x0a\x10\x12\x0e\x12\x0c\x0a\x01m\x2a\x07\x0a\x05\x19\x00\x00\x00\x00")
	f.Add(int8(0), raw)
	for codec := 1; codec <= 4; codec++ {
		b, _ := records.Deflate(nil, codec, raw, false)
		f.Add(int8(codec), b)
	}
	f.Add(int8(2), []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0x7f})
	cfg := clientsDefaults()
	cfg.Enabled, cfg.MaxBytes, cfg.PushInterval = true, 1<<16, time.Hour
	m := NewClientsMetrics(nil)
	c, err := NewClients(cfg, Collector{Protocol: "http/protobuf", Endpoint: "http://127.0.0.1:1/v1/metrics"}, m, func(string) string { return "" })
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close(0)
	ok := map[int16]bool{0: true, kerr.InvalidRecord.Code: true, kerr.TelemetryTooLarge.Code: true,
		kerr.UnsupportedCompressionType.Code: true, kerr.ThrottlingQuotaExceeded.Code: true}
	f.Fuzz(func(t *testing.T, codec int8, payload []byte) {
		sub := subscribe(t, c)
		r := pushReq(sub, codec, payload)
		r.Terminating = true // never throttled: each input is judged on its own
		if got := c.Push(r, ClientMeta{ClientID: "fuzz"}); !ok[got.ErrorCode] {
			t.Fatalf("codec %d, %d bytes: error code %d is not one a broker gives for a push", codec, len(payload), got.ErrorCode)
		}
	})
}
