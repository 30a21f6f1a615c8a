package cluster

import (
	"errors"
	"fmt"
)

// Fronting rewrites the broker addresses of relayed responses to kproxy's
// node ports and learns the topology from them. The relay calls Rewrite for
// every response; one of an API that carries no address costs a switch.
type Fronting struct {
	cfg  Config
	host string
	topo *Topology
}

// NewFronting rewrites addresses to host (the advertised host) and ports
// from cfg, and teaches topo the brokers it sees.
func NewFronting(cfg Config, host string, topo *Topology) *Fronting {
	return &Fronting{cfg: cfg, host: host, topo: topo}
}

// Topology is what the rewrites have learnt.
func (f *Fronting) Topology() *Topology { return f.topo }

// Rewrite gives the frame to send to the client: frame itself unless it
// named a broker. Brokers it names are learnt before it returns, so a
// client that dials one as soon as it reads the frame finds the node port
// pointed at the broker. An error means the frame must not be passed on.
func (f *Fronting) Rewrite(frame []byte, key, version int16) ([]byte, error) {
	if !Carries(key) {
		return frame, nil
	}
	out, seen, err := Rewrite(frame, key, version, f.mapBroker)
	if errors.Is(err, ErrUnmapped) {
		return nil, fmt.Errorf("%w (cluster.node_ids %d-%d)", err, f.cfg.NodeIDs.Min, f.cfg.NodeIDs.Max)
	}
	if err != nil {
		return nil, err
	}
	f.topo.Learn(seen)
	return out, nil
}

// mapBroker puts a broker on its node port. Controllers have no port of
// theirs (they are not fronted), nor do nodes outside node_ids.
func (f *Fronting) mapBroker(b Broker) (string, int32, bool) {
	if b.EndpointType != EndpointBroker {
		return "", 0, false
	}
	port, ok := f.cfg.Port(b.NodeID)
	if !ok {
		return "", 0, false
	}
	return f.host, int32(port), true
}

// Passes reports whether a request with key may be relayed: its answer
// names no address kproxy does not front (see Passes).
func (f *Fronting) Passes(key int16) bool { return Passes(key) }

// Hidden are the keys left out of the ApiVersions answers clients see.
func (f *Fronting) Hidden() []int16 { return Refused() }
