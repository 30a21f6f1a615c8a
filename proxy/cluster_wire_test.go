package proxy

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Raw Kafka clients and scripted brokers for the cluster-mode tests that
// check the bytes a client receives.

// clusterRoundTrip sends req with corr on c and returns the response frame
// the client received, and the frame decoded as a client would.
func clusterRoundTrip(t testing.TB, c net.Conn, req kmsg.Request, corr int32) ([]byte, kmsg.Response) {
	t.Helper()
	if _, err := c.Write(encodeRequest(req, corr)); err != nil {
		t.Fatalf("send %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	f, err := readFrame(c)
	if err != nil {
		t.Fatalf("%s v%d: no response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if corrOf(f) != corr {
		t.Fatalf("%s v%d: response has correlation id %d, want %d", kmsg.NameForKey(req.Key()), req.GetVersion(), corrOf(f), corr)
	}
	return f, decodeResponse(t, f, req.Key(), req.GetVersion())
}

// hostPort joins a host and a Kafka int32 port.
func hostPort(host string, port int32) string { return net.JoinHostPort(host, strconv.Itoa(int(port))) }

// parseRequest decodes a request frame (size prefix included) the way a
// broker does: header v1 or v2, then the body at its version.
func parseRequest(frame []byte) (kmsg.Request, int32, error) {
	if len(frame) < 14 {
		return nil, 0, fmt.Errorf("request frame of %d bytes", len(frame))
	}
	key := int16(binary.BigEndian.Uint16(frame[4:]))
	version := int16(binary.BigEndian.Uint16(frame[6:]))
	corr := int32(binary.BigEndian.Uint32(frame[8:]))
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, corr, fmt.Errorf("unknown API key %d", key)
	}
	req.SetVersion(version)
	off := 14
	if n := int16(binary.BigEndian.Uint16(frame[12:])); n > 0 {
		off += int(n)
	}
	if req.IsFlexible() { // header v2: tagged fields after the client id
		uv := func() uint64 {
			if off >= len(frame) {
				off = len(frame) + 1
				return 0
			}
			v, n := binary.Uvarint(frame[off:])
			if n <= 0 {
				off = len(frame) + 1
				return 0
			}
			off += n
			return v
		}
		for tags := uv(); tags > 0 && off <= len(frame); tags-- {
			uv()
			off += int(uv())
		}
	}
	if off > len(frame) {
		return nil, corr, fmt.Errorf("request header runs past the frame")
	}
	if err := req.ReadFrom(frame[off:]); err != nil {
		return nil, corr, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	return req, corr, nil
}

// responseFrame frames resp (at its set version) as a broker does.
func responseFrame(resp kmsg.Response, corr int32) []byte {
	out := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(out[4:], uint32(corr))
	if resp.IsFlexible() && resp.Key() != 18 {
		out = append(out, 0) // response header v1: no tagged fields
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

// scriptedBroker answers each request with what answer builds for it
// (its version set to the request's); nil closes the connection. It
// answers ApiVersions itself when answer does not, offering the versions
// kmsg knows, so that kproxy's discovery gets through.
func scriptedBroker(t testing.TB, answer func(req kmsg.Request) kmsg.Response) *fakeUpstream {
	t.Helper()
	return startFakeUpstream(t, func(c net.Conn, frame []byte) {
		req, corr, err := parseRequest(frame)
		if err != nil {
			t.Errorf("scripted broker: %v", err)
			c.Close()
			return
		}
		resp := answer(req)
		if resp == nil && req.Key() == 18 {
			av := kmsg.NewPtrApiVersionsResponse()
			for _, k := range []int16{0, 1, 3, 10, 18, 60} {
				v := kmsg.NewApiVersionsResponseApiKey()
				v.ApiKey, v.MinVersion, v.MaxVersion = k, 0, kmsg.ResponseForKey(k).MaxVersion()
				av.ApiKeys = append(av.ApiKeys, v)
			}
			resp = av
		}
		if resp == nil {
			c.Close()
			return
		}
		resp.SetVersion(req.GetVersion())
		c.Write(responseFrame(resp, corr))
	})
}

// metadataAnswer is a Metadata response naming brokers (node id to
// host:port) and no topic.
func metadataAnswer(t testing.TB, brokers map[int32]string) *kmsg.MetadataResponse {
	t.Helper()
	resp := kmsg.NewPtrMetadataResponse()
	for node, addr := range brokers {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("scripted broker address %q: %v", addr, err)
		}
		p, _ := strconv.Atoi(port)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = node, host, int32(p)
		resp.Brokers = append(resp.Brokers, b)
	}
	resp.ControllerID = 0
	return resp
}
