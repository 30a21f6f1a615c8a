package cluster

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// frameOf encodes resp as kproxy relays it: size prefix, correlation id,
// header tags when the version is flexible (not for ApiVersions), body.
func frameOf(resp kmsg.Response) []byte {
	f := []byte{0, 0, 0, 0, 0, 0, 0x30, 0x39}
	if resp.IsFlexible() && resp.Key() != framing.KeyApiVersions {
		f = append(f, 0)
	}
	f = resp.AppendTo(f)
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	return f
}

// decodeFrame is frameOf's inverse, used to check what a client would read.
func decodeFrame(frame []byte, key, version int16) (kmsg.Response, error) {
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	off, err := bodyOffset(frame, key, resp.IsFlexible())
	if err != nil {
		return nil, err
	}
	return resp, resp.ReadFrom(frame[off:])
}

const (
	realHost  = "broker-%d.real.example"
	proxyHost = "kproxy.local"
	ctrlHost  = "kproxy-ctrl.local"
)

func realAddr(node int32) (string, int32) { return fmt.Sprintf(realHost, node), 19092 + node }

// testMapper maps brokers onto 9100+node and controllers onto 9500+node,
// so a test can tell which kind a rewritten address was taken for; node
// ids above 1000 are refused.
func testMapper(b Broker) (string, int32, bool) {
	if b.NodeID > 1000 || b.NodeID < 0 {
		return "", 0, false
	}
	if b.EndpointType == EndpointController {
		return ctrlHost, 9500 + b.NodeID, true
	}
	return proxyHost, 9100 + b.NodeID, true
}

// addresses returns every host:port a decoded response carries, using the
// package's own visitor for decoded APIs and the kmsg fields for Produce
// and Fetch.
func addresses(resp kmsg.Response) []string {
	var out []string
	add := func(h string, p int32) { out = append(out, fmt.Sprintf("%s:%d", h, p)) }
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, b := range r.Brokers {
			add(b.Host, b.Port)
		}
	case *kmsg.FetchResponse:
		for _, b := range r.Brokers {
			add(b.Host, b.Port)
		}
	default:
		_ = visit(resp, func(_ int32, h *string, p *int32, _ int8) error { add(*h, *p); return nil })
	}
	return out
}

func leaks(addrs []string) bool {
	for _, a := range addrs {
		if strings.Contains(a, ".real.") {
			return true
		}
	}
	return false
}
