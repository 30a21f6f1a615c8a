// Package embedded runs franz-go's in-process kfake broker behind kproxy,
// for `kproxy demo` and for tests.
//
// A Kafka client reads broker addresses from Metadata and connects to them
// directly, so a broker that advertised its own port would let clients
// bypass kproxy after the first request. The broker here advertises the
// address kproxy listens on instead.
package embedded

import (
	"net"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is a kfake broker whose port is reserved before kproxy starts, so
// kproxy can be given it as its upstream.
type Broker struct {
	ln net.Listener
}

// Reserve binds the broker's port on loopback.
func Reserve() (*Broker, error) { return ReserveAt("127.0.0.1:0") }

// ReserveAt binds the broker's port at addr, for a broker run in its own
// process on a port given to kproxy beforehand (kbench kfake).
func ReserveAt(addr string) (*Broker, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Broker{ln: ln}, nil
}

// Addr is where the broker really listens: kproxy's upstream.
func (b *Broker) Addr() string { return b.ln.Addr().String() }

// Start runs a one-broker kfake cluster on the reserved port, advertising
// advertise (kproxy's address) in Metadata.
func (b *Broker) Start(advertise string, opts ...kfake.Opt) (*kfake.Cluster, error) {
	adv, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		return nil, err
	}
	listen := func(string, string) (net.Listener, error) { return advertised{b.ln, adv}, nil }
	return kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.ListenFn(listen)}, opts...)...)
}

// advertised reports another address than the one it accepts on.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }
