package sasl

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// pipePeer is the broker end of a net.Pipe: it reads one request frame and
// hands it to the test.
type pipePeer struct {
	t            *testing.T
	conn, client net.Conn
}

func newPipe(t *testing.T) (RoundTrip, *pipePeer) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return StreamRoundTrip(a, 4096), &pipePeer{t: t, conn: b, client: a}
}

// request reads one frame and returns key, version, correlation id and
// client id from its header.
func (p *pipePeer) request() (key, version int16, corr int32, clientID string) {
	var size [4]byte
	if _, err := io.ReadFull(p.conn, size[:]); err != nil {
		p.t.Errorf("peer: %v", err)
		return
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(p.conn, b); err != nil {
		p.t.Errorf("peer: %v", err)
		return
	}
	key = int16(binary.BigEndian.Uint16(b))
	version = int16(binary.BigEndian.Uint16(b[2:]))
	corr = int32(binary.BigEndian.Uint32(b[4:]))
	n := int(binary.BigEndian.Uint16(b[8:]))
	return key, version, corr, string(b[10 : 10+n])
}

// frame is a response frame: size, correlation id, then rest.
func frame(corr int32, rest []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(rest)))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	return append(b, rest...)
}

func (p *pipePeer) write(b []byte) {
	if _, err := p.conn.Write(b); err != nil {
		p.t.Errorf("peer write: %v", err)
	}
}

func TestStreamRoundTrip(t *testing.T) {
	rt, peer := newPipe(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// SaslAuthenticate v2 is flexible: its response header has a
		// tag section, here with one unknown tag to step over.
		key, v, corr, cid := peer.request()
		if key != 36 || v != 2 || corr != 1 || cid != "kproxy" {
			t.Errorf("request key %d v%d corr %d client %q, want 36 v2 corr 1 kproxy", key, v, corr, cid)
		}
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.Version = 2
		resp.SASLAuthBytes = []byte("server-first")
		resp.SessionLifetimeMillis = 1234
		tags := []byte{1, 9, 3, 'x', 'y', 'z'}
		peer.write(frame(corr, resp.AppendTo(tags)))

		// ApiVersions v3 is flexible too, but its response header is
		// always v0: no tag section.
		key, v, corr, _ = peer.request()
		if key != 18 || v != 3 || corr != 2 {
			t.Errorf("request key %d v%d corr %d, want 18 v3 corr 2", key, v, corr)
		}
		av := kmsg.NewPtrApiVersionsResponse()
		av.Version = 3
		av.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 36, MaxVersion: 2}}
		peer.write(frame(corr, av.AppendTo(nil)))
	}()

	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 2
	req.SASLAuthBytes = []byte("client-first")
	kr, err := rt(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	sa := kr.(*kmsg.SASLAuthenticateResponse)
	if string(sa.SASLAuthBytes) != "server-first" || sa.SessionLifetimeMillis != 1234 {
		t.Errorf("decoded %+v", sa)
	}

	avReq := kmsg.NewPtrApiVersionsRequest()
	avReq.Version = 3
	avReq.ClientSoftwareName, avReq.ClientSoftwareVersion = "kproxy", "test"
	kr, err = rt(context.Background(), avReq)
	if err != nil {
		t.Fatal(err)
	}
	if av := kr.(*kmsg.ApiVersionsResponse); len(av.ApiKeys) != 1 || av.ApiKeys[0].MaxVersion != 2 {
		t.Errorf("decoded %+v", av)
	}
	<-done
}

func TestStreamRoundTripBadResponses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reply    func(corr int32) []byte
		want     string
		flexible bool
	}{
		{"over the limit", func(int32) []byte { return binary.BigEndian.AppendUint32(nil, 4097) }, "size 4097 is over the 4096 bytes limit", false},
		{"negative size", func(int32) []byte { return binary.BigEndian.AppendUint32(nil, 0xffffff00) }, "invalid size", false},
		{"too short", func(int32) []byte { return []byte{0, 0, 0, 2} }, "invalid size 2", false},
		{"TLS alert", func(int32) []byte { return []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46} }, "TLS alert", false},
		{"wrong correlation id", func(corr int32) []byte { return frame(corr+7, []byte{0, 0}) }, "correlation id 8, want 1", false},
		{"closed mid-frame", func(corr int32) []byte { return frame(corr, nil)[:6] }, "the broker closed the connection", false},
		{"truncated body", func(corr int32) []byte { return frame(corr, []byte{0}) }, "decoding SASLHandshake v1 response", false},
		{"bad header tags", func(corr int32) []byte { return frame(corr, []byte{0x80}) }, "response header", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, peer := newPipe(t)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _, corr, _ := peer.request()
				// The reader may stop early (that is the point), so
				// a short write is expected.
				_, _ = peer.conn.Write(tc.reply(corr))
				peer.conn.Close()
			}()
			var req kmsg.Request = &kmsg.SASLHandshakeRequest{Version: 1}
			if tc.flexible {
				req = &kmsg.SASLAuthenticateRequest{Version: 2}
			}
			_, err := rt(context.Background(), req)
			peer.client.Close() // unblocks the peer's write when the reader stopped early
			<-done
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestStreamRoundTripCancel: a broker that never answers does not hold
// the caller past its context.
func TestStreamRoundTripCancel(t *testing.T) {
	rt, peer := newPipe(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		peer.request()
		cancel()
	}()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = 1
	_, err := rt(ctx, req)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	// Already cancelled: nothing is written.
	if _, err := rt(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// TestStreamRoundTripPlainReader: over a plain io.ReadWriter (no
// deadlines) the exchange still works.
func TestStreamRoundTripPlainReader(t *testing.T) {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version = 1
	resp.SupportedMechanisms = []string{Plain}
	rw := &struct {
		io.Reader
		io.Writer
	}{strings.NewReader(string(frame(1, resp.AppendTo(nil)))), io.Discard}
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version = 1
	kr, err := StreamRoundTrip(rw, 4096)(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := kr.(*kmsg.SASLHandshakeResponse).SupportedMechanisms; len(got) != 1 || got[0] != Plain {
		t.Errorf("mechanisms %v", got)
	}
}
