package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kproxy/kproxy/framing"
)

// Endpoint types of DescribeCluster v1+ (KIP-919).
const (
	// EndpointBroker is a broker endpoint; every API but DescribeCluster
	// reports only these.
	EndpointBroker int8 = 1
	// EndpointController is a KRaft controller endpoint, reported by
	// DescribeCluster when the client asked for controllers. It must not
	// be mapped onto a broker listener.
	EndpointController int8 = 2
)

// Broker is one broker address a response carried, as the broker sent it.
type Broker struct {
	NodeID       int32
	Host         string
	Port         int32
	EndpointType int8 // EndpointBroker, or what DescribeCluster said
}

// Mapper gives the address a client must see for a broker. ok=false means
// the node is not one the caller serves (e.g. outside its node id range):
// Rewrite then fails, and the caller closes the pair rather than leak the
// real address. The mapper sees b.EndpointType so that it can give
// controllers their own treatment instead of a broker port; a
// DescribeCluster answer whose controllers it refuses becomes the error
// UNSUPPORTED_ENDPOINT_TYPE, with no addresses, instead of a failure.
type Mapper func(b Broker) (host string, port int32, ok bool)

// Rewrite replaces every broker address in a whole response frame (size
// prefix, response header, body; as kproxy relays it) of the given API key
// and version, and returns the frame to send on (frame itself when nothing
// changed, else a new slice) and the brokers it saw.
//
// Frames of APIs that carry no broker address are returned as they are.
// Produce and Fetch are walked without decoding their records, and only
// rewritten when their NodeEndpoints tag is present. An address-bearing
// response that cannot be parsed, or whose version kmsg does not know, is
// an error: its layout cannot be trusted to hold no address.
func Rewrite(frame []byte, key, version int16, m Mapper) ([]byte, []Broker, error) {
	switch key {
	case framing.KeyProduce, framing.KeyFetch:
		return rewriteTagged(frame, key, version, m)
	case framing.KeyMetadata, framing.KeyFindCoordinator, framing.KeyDescribeCluster, framing.KeyShareFetch, framing.KeyShareAcknowledge:
		return rewriteDecoded(frame, key, version, m)
	}
	return frame, nil, nil
}

// Carries reports whether responses of this key can carry broker addresses
// at some version, i.e. whether Rewrite may change them.
func Carries(key int16) bool {
	switch key {
	case framing.KeyProduce, framing.KeyFetch, framing.KeyMetadata, framing.KeyFindCoordinator, framing.KeyDescribeCluster, framing.KeyShareFetch, framing.KeyShareAcknowledge:
		return true
	}
	return false
}

// bodyOffset checks the size prefix and returns where the body starts:
// after the size, the correlation id and, for flexible versions (header
// v1, never for ApiVersions), the header's tagged fields.
func bodyOffset(frame []byte, key int16, flexible bool) (int, error) {
	if len(frame) < 8 {
		return 0, fmt.Errorf("cluster: frame of %d bytes is shorter than a response header", len(frame))
	}
	if size := binary.BigEndian.Uint32(frame); uint64(size) != uint64(len(frame)-4) {
		return 0, fmt.Errorf("cluster: size prefix %d does not match the %d bytes after it", size, len(frame)-4)
	}
	if !flexible || key == framing.KeyApiVersions {
		return 8, nil
	}
	r := reader{b: frame, off: 8}
	r.skipTags()
	if r.bad {
		return 0, fmt.Errorf("cluster: response header tags: %w", errShort)
	}
	return r.off, nil
}

// ErrUnmapped is a broker the Mapper refused.
var ErrUnmapped = errors.New("cluster: broker has no mapped address")

// mapBroker applies m and turns a refusal into the error Rewrite returns.
func mapBroker(m Mapper, b Broker) (string, int32, error) {
	host, port, ok := m(b)
	if !ok {
		return "", 0, fmt.Errorf("%w: node %d (%s:%d, endpoint type %d)", ErrUnmapped, b.NodeID, b.Host, b.Port, b.EndpointType)
	}
	return host, port, nil
}

// withSize stores the size prefix of a rebuilt frame.
func withSize(frame []byte) []byte {
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	return frame
}
