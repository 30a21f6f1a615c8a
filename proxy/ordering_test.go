package proxy

import (
	"bytes"
	"encoding/binary"
	"math"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// Pipelined requests with negative, extreme and repeated correlation ids
// all come back to the right request, in order, and decode for their API
// and version (ApiVersions answers use header v0 even when flexible).
func TestPipelinedOpaqueCorrelationIDs(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "t")})
	c := dialRaw(t, env.addr)
	ids := []int32{-1, math.MinInt32, math.MaxInt32, 7, 7, 7, 0, -7}
	type sent struct {
		id  int32
		req kmsg.Request
	}
	var batch []byte
	var want []sent
	for i := 0; i < 200; i++ {
		id := ids[i%len(ids)]
		var req kmsg.Request
		switch i % 3 {
		case 0:
			r := kmsg.NewPtrApiVersionsRequest()
			r.Version = 3
			r.ClientSoftwareName, r.ClientSoftwareVersion = "raw", "1"
			req = r
		case 1:
			r := kmsg.NewPtrMetadataRequest()
			r.Version = 12
			req = r
		default:
			r := kmsg.NewPtrMetadataRequest()
			r.Version = 1
			req = r
		}
		batch = append(batch, encodeRequest(req, id)...)
		want = append(want, sent{id, req})
	}
	if _, err := c.Write(batch); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i, w := range want {
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		h, err := framing.ParseResponseHeader(f, w.req.Key(), w.req.GetVersion())
		if err != nil {
			t.Fatal(err)
		}
		if h.CorrelationID != w.id {
			t.Fatalf("response %d: correlation id %d, want %d", i, h.CorrelationID, w.id)
		}
		resp := w.req.ResponseKind()
		resp.SetVersion(w.req.GetVersion())
		if err := resp.ReadFrom(f[h.BodyOffset:]); err != nil {
			t.Fatalf("response %d (%T v%d) does not decode: %v", i, resp, w.req.GetVersion(), err)
		}
	}
}

// Produce with acks=0 gets no response and no table entry: the request
// after it on the same connection still gets its own answer.
func TestAcksZeroThenOtherRequests(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "t")})
	c := dialRaw(t, env.addr)
	var batch []byte
	for i := 0; i < 5; i++ {
		p := produceRequest(9, 0, "t") // flexible, with a transactional id field
		batch = append(batch, encodeRequest(p, int32(100+i))...)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	batch = append(batch, encodeRequest(av, 42)...)
	if _, err := c.Write(batch); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := readFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := corrOf(f); got != 42 {
		t.Fatalf("first response has id %d, want the ApiVersions id 42", got)
	}
	waitFor(t, 10*time.Second, "in-flight gauge back to 0", func() bool { return testutil.ToFloat64(env.m.Relay.InFlight) == 0 })
	if env.requests("Produce") != 5 {
		t.Fatalf("kproxy counted %v produce requests, want 5", env.requests("Produce"))
	}
}

// With max_in_flight 4, kproxy forwards four requests and holds the rest
// until responses drain; every response still arrives in order.
func TestBackpressureAtMaxInFlight(t *testing.T) {
	held := make(chan []byte, 16) // requests seen, answered only on release
	release := make(chan struct{})
	up := startFakeUpstream(t, func(c net.Conn, f []byte) {
		held <- f
		select {
		case <-release:
		default:
			if len(held) < 4 {
				return
			}
			<-release // a broker answers in order: the held ones first
		}
		for len(held) > 0 {
			echoResponse(c, <-held, []byte{0, 0})
		}
	})
	env := startProxy(t, up.addr(), func(_ *Config, _ *framing.Config, cc *correlate.Config) { cc.MaxInFlight = 4 })
	c := dialRaw(t, env.addr)
	var batch []byte
	for i := 0; i < 10; i++ {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = 0
		batch = append(batch, encodeRequest(r, int32(1000+i))...)
	}
	c.Write(batch)
	// kproxy reads the batch, forwards four and waits; the upstream and
	// kproxy get there at their own pace.
	waitFor(t, 10*time.Second, "four requests at the upstream", func() bool { return len(held) >= 4 })
	waitFor(t, 10*time.Second, "the backpressure wait counted", func() bool {
		return testutil.ToFloat64(env.m.Relay.Backpressure) > 0
	})
	if n := len(held); n != 4 {
		t.Fatalf("upstream saw %d requests while 4 were unanswered, want 4", n)
	}
	close(release)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := 0; i < 10; i++ {
		f, err := readFrame(c)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if corrOf(f) != int32(1000+i) {
			t.Fatalf("response %d has id %d, want %d", i, corrOf(f), 1000+i)
		}
	}
}

// After SaslHandshake v0, SASL tokens travel without a Kafka header; kproxy
// relays them untouched and resumes Kafka framing once PLAIN completes.
func TestSaslHandshakeV0RawTokens(t *testing.T) {
	token := []byte("\x00user\x00secret")
	var raw bool
	up := startRawUpstream(t, func(c net.Conn, f []byte) {
		switch {
		case raw:
			if !bytes.Equal(f[4:], token) {
				t.Errorf("broker got token %q, want %q", f[4:], token)
			}
			c.Write([]byte{0, 0, 0, 0}) // empty server token: success
			raw = false
		case binary.BigEndian.Uint16(f[4:]) == 17: // SaslHandshake v0
			echoResponse(c, f, []byte{0, 0, 0, 0, 0, 1, 0, 5, 'P', 'L', 'A', 'I', 'N'})
			raw = true
		default:
			echoResponse(c, f, []byte{0, 0, 0, 0, 0, 0})
		}
	})
	env := startProxy(t, up.addr())
	c := dialRaw(t, env.addr)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 0
	hs.Mechanism = "PLAIN"
	c.Write(encodeRequest(hs, -3))
	if f, err := readFrame(c); err != nil || corrOf(f) != -3 {
		t.Fatalf("handshake response: %v %v", f, err)
	}
	tok := binary.BigEndian.AppendUint32(nil, uint32(len(token)))
	c.Write(append(tok, token...))
	if f, err := readFrame(c); err != nil || len(f) != 4 {
		t.Fatalf("token response: %q %v", f, err)
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	c.Write(encodeRequest(av, 77))
	if f, err := readFrame(c); err != nil || corrOf(f) != 77 {
		t.Fatalf("request after SASL: %v %v", f, err)
	}
}
