package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Helpers that speak the Kafka wire format by hand, for tests that need to
// control exactly what kproxy sees.

// encodeRequest frames req (at its set version) with a header carrying corr.
func encodeRequest(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test")).AppendRequest(nil, req, corr)
}

// produceRequest is a Produce of one empty partition (0) of topic.
func produceRequest(version, acks int16, topic string) *kmsg.ProduceRequest {
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks, p.TimeoutMillis = version, acks, 1000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	t.Partitions = append(t.Partitions, kmsg.NewProduceRequestTopicPartition())
	p.Topics = append(p.Topics, t)
	return p
}

// errFrameTooLarge is readFrame's error for a size prefix past any test's
// frames, which it returns with the prefix.
var errFrameTooLarge = errors.New("not a frame any test sends")

// readFrame reads one size-prefixed frame (prefix included) from c.
func readFrame(c net.Conn) ([]byte, error) {
	var p [4]byte
	if _, err := io.ReadFull(c, p[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(p[:])
	if n > 64<<20 {
		return p[:], fmt.Errorf("test peer: frame size %d too large: %w", n, errFrameTooLarge)
	}
	f := make([]byte, 4+n)
	copy(f, p[:])
	_, err := io.ReadFull(c, f[4:])
	return f, err
}

func corrOf(frame []byte) int32 { return int32(binary.BigEndian.Uint32(frame[4:])) }

// fakeUpstream is a scripted broker: handle gets each request frame from a
// connection and may write any bytes back. Unless started raw, every frame
// must carry a request header a broker would parse; one that does not
// fails the test with its bytes and the frame before it on that
// connection (a torn or misaligned stream from kproxy), and the
// connection is closed, where a handler reading the header would panic.
type fakeUpstream struct {
	t      testing.TB
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	closed bool // under mu: the test is ending, reports would come too late
	handle func(c net.Conn, frame []byte)
	check  func(frame []byte) error // nil for a raw peer
}

func startFakeUpstream(t testing.TB, handle func(c net.Conn, frame []byte)) *fakeUpstream {
	t.Helper()
	return startFakeUpstreamAt(t, "127.0.0.1:0", handle)
}

// startFakeUpstreamAt is startFakeUpstream listening on addr.
func startFakeUpstreamAt(t testing.TB, addr string, handle func(c net.Conn, frame []byte)) *fakeUpstream {
	t.Helper()
	return serveFakeUpstream(t, addr, handle, checkRequestHeader)
}

// startRawUpstream is a fakeUpstream that takes frames which are not
// requests kmsg knows: the raw tokens of a SaslHandshake v0 exchange, api
// keys newer than kmsg.
func startRawUpstream(t testing.TB, handle func(c net.Conn, frame []byte)) *fakeUpstream {
	t.Helper()
	return serveFakeUpstream(t, "127.0.0.1:0", handle, nil)
}

func serveFakeUpstream(t testing.TB, addr string, handle func(c net.Conn, frame []byte), check func([]byte) error) *fakeUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	u := &fakeUpstream{t: t, ln: ln, handle: handle, check: check}
	t.Cleanup(u.close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			go u.serve(c)
		}
	}()
	return u
}

// serve reads c's frames in order and hands each valid one to handle.
func (u *fakeUpstream) serve(c net.Conn) {
	defer c.Close()
	var prev []byte
	for n := 0; ; n++ {
		f, err := readFrame(c)
		if err != nil {
			if errors.Is(err, errFrameTooLarge) {
				u.report("test peer: frame %d on %s: %v\n  size prefix: % x\n  frame before (%d bytes): % x",
					n, c.RemoteAddr(), err, f, len(prev), prev)
			}
			return // a frame cut short by a close is not kproxy's fault
		}
		if u.check != nil {
			if err := u.check(f); err != nil {
				u.report("test peer: frame %d on %s is not a request: %v\n  frame (%d bytes): % x\n  frame before (%d bytes): % x",
					n, c.RemoteAddr(), err, len(f), f, len(prev), prev)
				return
			}
		}
		u.handle(c, f)
		prev = f
	}
}

// report fails the test from the peer's goroutine, unless it has ended.
func (u *fakeUpstream) report(format string, args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.closed {
		u.t.Errorf(format, args...)
	}
}

// checkRequestHeader reports why frame (size prefix included) cannot be a
// Kafka request: too short for a v0 header (api key, version, correlation
// id), an api key kmsg does not know, or a version outside the key's range.
func checkRequestHeader(frame []byte) error {
	if len(frame) < 4+8 {
		return fmt.Errorf("size %d is shorter than a request header", len(frame)-4)
	}
	key, version := int16(binary.BigEndian.Uint16(frame[4:])), int16(binary.BigEndian.Uint16(frame[6:]))
	req := kmsg.RequestForKey(key)
	if req == nil {
		return fmt.Errorf("unknown api key %d", key)
	}
	if version < 0 || version > req.MaxVersion() {
		return fmt.Errorf("%s version %d is outside 0..%d", kmsg.NameForKey(key), version, req.MaxVersion())
	}
	return nil
}

func (u *fakeUpstream) addr() string { return u.ln.Addr().String() }

// close stops accepting and closes every connection: the broker dies.
func (u *fakeUpstream) close() {
	u.ln.Close()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for _, c := range u.conns {
		c.Close()
	}
}

// echoResponse answers a request frame with a v0-header response carrying
// the request's correlation id and the given body.
func echoResponse(c net.Conn, req []byte, body []byte) {
	out := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(out, uint32(4+len(body)))
	copy(out[4:8], req[8:12])
	c.Write(append(out, body...))
}

// expectClosed fails unless the server closes c within d.
func expectClosed(t testing.TB, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 1024)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection still open after %v", d)
		}
		return
	}
}
