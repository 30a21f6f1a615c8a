package proxy

import (
	"encoding/binary"
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

// readFrame reads one size-prefixed frame (prefix included) from c.
func readFrame(c net.Conn) ([]byte, error) {
	var p [4]byte
	if _, err := io.ReadFull(c, p[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(p[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("test peer: frame size %d too large", n)
	}
	f := make([]byte, 4+n)
	copy(f, p[:])
	_, err := io.ReadFull(c, f[4:])
	return f, err
}

func corrOf(frame []byte) int32 { return int32(binary.BigEndian.Uint32(frame[4:])) }

// fakeUpstream is a scripted broker: handle gets each request frame from a
// connection and may write any bytes back.
type fakeUpstream struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	handle func(c net.Conn, frame []byte)
}

func startFakeUpstream(t testing.TB, handle func(c net.Conn, frame []byte)) *fakeUpstream {
	t.Helper()
	return startFakeUpstreamAt(t, "127.0.0.1:0", handle)
}

// startFakeUpstreamAt is startFakeUpstream listening on addr.
func startFakeUpstreamAt(t testing.TB, addr string, handle func(c net.Conn, frame []byte)) *fakeUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	u := &fakeUpstream{ln: ln, handle: handle}
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
			go func() {
				defer c.Close()
				for {
					f, err := readFrame(c)
					if err != nil {
						return
					}
					u.handle(c, f)
				}
			}()
		}
	}()
	return u
}

func (u *fakeUpstream) addr() string { return u.ln.Addr().String() }

// close stops accepting and closes every connection: the broker dies.
func (u *fakeUpstream) close() {
	u.ln.Close()
	u.mu.Lock()
	defer u.mu.Unlock()
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
