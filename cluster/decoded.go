package cluster

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rewriteDecoded handles the small address-bearing responses (Metadata,
// FindCoordinator, DescribeCluster, ShareFetch, ShareAcknowledge): decode
// with kmsg, rewrite, encode. They are rare and small, so clarity wins
// over speed. ShareFetch records stay opaque bytes in kmsg.
func rewriteDecoded(frame []byte, key, version int16, m Mapper) ([]byte, []Broker, error) {
	resp := kmsg.ResponseForKey(key)
	if version < 0 || version > resp.MaxVersion() {
		return nil, nil, fmt.Errorf("cluster: %s v%d is beyond what kmsg v1.15.1 knows; refusing to pass on a layout that may hold broker addresses", kmsg.NameForKey(key), version)
	}
	resp.SetVersion(version)
	off, err := bodyOffset(frame, key, resp.IsFlexible())
	if err != nil {
		return nil, nil, err
	}
	if err := resp.ReadFrom(frame[off:]); err != nil {
		return nil, nil, fmt.Errorf("cluster: decoding %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	var seen []Broker
	// each is called once per address field; it records what the broker
	// sent and overwrites it in place with the mapped address.
	each := func(nodeID int32, host *string, port *int32, typ int8) error {
		b := Broker{NodeID: nodeID, Host: *host, Port: *port, EndpointType: typ}
		h, p, err := mapBroker(m, b)
		if err != nil {
			return err
		}
		seen = append(seen, b)
		*host, *port = h, p
		return nil
	}
	if err := visit(resp, each); err != nil {
		return nil, nil, err
	}
	out := append(make([]byte, 0, len(frame)+64), frame[:off]...)
	out = resp.AppendTo(out)
	return withSize(out), seen, nil
}

// errNoneWithAddress: a coordinator of node -1 ("none") should have no
// address; one that has is not passed on unmapped.
var errNoneWithAddress = errors.New("cluster: FindCoordinator names node -1 with an address")

// visit calls each for every broker address field of a decoded response.
func visit(resp kmsg.Response, each func(int32, *string, *int32, int8) error) error {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			b := &r.Brokers[i]
			if err := each(b.NodeID, &b.Host, &b.Port, EndpointBroker); err != nil {
				return err
			}
		}
	case *kmsg.FindCoordinatorResponse:
		// v0-3 answer one key at top level; v4+ answer a batch. Node -1
		// means no coordinator (an error is set): its empty address is
		// left alone, and one that is not empty is refused.
		if r.Version < 4 {
			if r.NodeID == -1 && r.Host != "" {
				return errNoneWithAddress
			}
			if r.NodeID != -1 {
				if err := each(r.NodeID, &r.Host, &r.Port, EndpointBroker); err != nil {
					return err
				}
			}
		}
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			if c.NodeID == -1 {
				if c.Host != "" {
					return errNoneWithAddress
				}
				continue
			}
			if err := each(c.NodeID, &c.Host, &c.Port, EndpointBroker); err != nil {
				return err
			}
		}
	case *kmsg.DescribeClusterResponse:
		typ := EndpointBroker
		if r.Version >= 1 {
			typ = r.EndpointType
		}
		for i := range r.Brokers {
			b := &r.Brokers[i]
			if err := each(b.NodeID, &b.Host, &b.Port, typ); err != nil {
				if typ == EndpointController && errors.Is(err, ErrUnmapped) {
					refuseControllers(r)
					return nil
				}
				return err
			}
		}
	case *kmsg.ShareFetchResponse:
		for i := range r.NodeEndpoints {
			b := &r.NodeEndpoints[i]
			if err := each(b.NodeID, &b.Host, &b.Port, EndpointBroker); err != nil {
				return err
			}
		}
	case *kmsg.ShareAcknowledgeResponse:
		for i := range r.NodeEndpoints {
			b := &r.NodeEndpoints[i]
			if err := each(b.NodeID, &b.Host, &b.Port, EndpointBroker); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("cluster: no address visitor for %T", resp)
	}
	return nil
}

// refuseControllers turns a DescribeCluster answer listing controllers the
// caller does not serve into the error a broker gives for an endpoint type
// it does not support: the client learns why, and no address leaks.
func refuseControllers(r *kmsg.DescribeClusterResponse) {
	msg := "kproxy fronts the cluster's brokers, not its controllers: reach the controllers directly"
	r.ErrorCode = kerr.UnsupportedEndpointType.Code
	r.ErrorMessage = &msg
	r.Brokers = nil
	r.ControllerID = -1
}
