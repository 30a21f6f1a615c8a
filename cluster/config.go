package cluster

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// maxNodePorts bounds node_ids' span: every node port is bound at start
// (so a client's cached metadata finds its broker after a restart), and
// each costs a socket and a goroutine.
const maxNodePorts = 4096

// Config is the `cluster:` section of kproxy.yaml. Without it
// (node_port_base 0) kproxy fronts one broker port; with it, proxy.listen
// is a bootstrap listener for the cluster behind proxy.upstream, and each
// broker is served on a port of its own.
type Config struct {
	// NodePortBase is the port of the broker with node id NodeIDs.Min; the
	// broker with node id N is served on listen's host, port
	// node_port_base + N - node_ids.min. Ports are deterministic so that
	// a client's cached metadata stays valid across a kproxy restart.
	NodePortBase int `yaml:"node_port_base"`
	// NodeIDs are the node ids served. A broker outside them is refused
	// with a log line: its address is never passed on.
	NodeIDs NodeIDRange `yaml:"node_ids"`
	// AdvertisedHost is the host written into rewritten addresses, what
	// clients dial; default: proxy.listen's host.
	AdvertisedHost string `yaml:"advertised_host"`
	// AllowedHosts bounds the broker hosts kproxy dials, and so sends
	// its TLS client certificate and SASL credentials to, when a Metadata
	// or FindCoordinator answer names them: an exact host
	// ("b-1.kafka.internal", "10.0.0.7") or a suffix glob
	// ("*.kafka.internal", any host ending ".kafka.internal"), compared
	// without case. A client of a node port whose broker is elsewhere is
	// refused. Empty, the default, allows every host the cluster names.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// NodeIDRange is an inclusive range of broker node ids.
type NodeIDRange struct {
	Min int32 `yaml:"min"`
	Max int32 `yaml:"max"`
}

// Defaults is the section as an absent one reads: cluster mode off, and
// node ids 0-99 once node_port_base turns it on.
func Defaults() Config { return Config{NodeIDs: NodeIDRange{Min: 0, Max: 99}} }

// On reports whether kproxy fronts a whole cluster.
func (c Config) On() bool { return c.NodePortBase != 0 }

// Validate reports the first invalid field. listen is proxy.listen, whose
// host the node ports share.
func (c Config) Validate(listen string) error {
	if !c.On() {
		if c.AdvertisedHost != "" || c.NodeIDs != Defaults().NodeIDs {
			return fielderr.New("node_port_base", "is required to front a cluster (the port of the first node id)")
		}
		return nil
	}
	switch {
	case c.NodePortBase < 1 || c.NodePortBase > 65535:
		return fielderr.New("node_port_base", "must be a port, 1-65535")
	case c.NodeIDs.Min < 0:
		return fielderr.New("node_ids.min", "must not be negative")
	case c.NodeIDs.Max < c.NodeIDs.Min:
		return fielderr.New("node_ids.max", fmt.Sprintf("must be at least node_ids.min (%d)", c.NodeIDs.Min))
	case int64(c.NodeIDs.Max)-int64(c.NodeIDs.Min)+1 > maxNodePorts:
		return fielderr.New("node_ids", fmt.Sprintf("spans %d node ids; at most %d are served (each is a bound port)",
			int64(c.NodeIDs.Max)-int64(c.NodeIDs.Min)+1, maxNodePorts))
	}
	if last := c.lastPort(); last > 65535 {
		return fielderr.New("node_port_base", fmt.Sprintf("%d + %d node ids runs past port 65535 (to %d)",
			c.NodePortBase, c.NodeIDs.Max-c.NodeIDs.Min+1, last))
	}
	if _, port, err := net.SplitHostPort(listen); err == nil {
		if p, err := strconv.Atoi(port); err == nil && c.Serves(p) {
			return fielderr.New("node_port_base", fmt.Sprintf("node ports %d-%d include proxy.listen's port %d", c.NodePortBase, c.lastPort(), p))
		}
	}
	if c.AdvertisedHost != "" {
		if _, _, err := net.SplitHostPort(c.AdvertisedHost); err == nil {
			return fielderr.New("advertised_host", "is a host without a port (each node has its own port)")
		}
		if strings.ContainsAny(c.AdvertisedHost, "[]") {
			// Brokers advertise IPv6 addresses bare, and clients add the
			// brackets ("[[::1]]:9100" dials nothing).
			return fielderr.New("advertised_host", "must be written without brackets, as brokers advertise an IPv6 address (::1, not [::1]): clients add them")
		}
	} else if ip := net.ParseIP(c.Host(listen)); ip != nil && ip.IsUnspecified() || c.Host(listen) == "" {
		return fielderr.New("advertised_host", "is required when proxy.listen binds every interface: it is the host clients dial")
	}
	for i, h := range c.AllowedHosts {
		rest := strings.TrimPrefix(h, "*.")
		if rest == "" || strings.ContainsAny(rest, "*?[]: /") {
			return fielderr.New(fmt.Sprintf("allowed_hosts.%d", i), "must be a host (b-1.kafka.internal) or *. and a domain (*.kafka.internal)")
		}
	}
	return nil
}

// HostAllowed reports whether kproxy may dial a broker at addr
// (host:port), under allowed_hosts.
func (c Config) HostAllowed(addr string) bool {
	if len(c.AllowedHosts) == 0 {
		return true
	}
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, p := range c.AllowedHosts {
		p = strings.ToLower(p)
		if suffix, ok := strings.CutPrefix(p, "*"); ok {
			if strings.HasSuffix(host, suffix) && len(host) > len(suffix) {
				return true
			}
		} else if host == p {
			return true
		}
	}
	return false
}

// lastPort is the port of node_ids.max.
func (c Config) lastPort() int { return c.NodePortBase + int(c.NodeIDs.Max-c.NodeIDs.Min) }

// Serves reports whether port is one of the node ports.
func (c Config) Serves(port int) bool {
	return c.On() && port >= c.NodePortBase && port <= c.lastPort()
}

// Port is the port node is served on; ok is false outside node_ids.
func (c Config) Port(node int32) (port int, ok bool) {
	if node < c.NodeIDs.Min || node > c.NodeIDs.Max {
		return 0, false
	}
	return c.NodePortBase + int(node-c.NodeIDs.Min), true
}

// OutsideError is a cluster with brokers outside node_ids. Every
// Metadata response names every broker, and one naming a broker kproxy
// cannot front is not passed on: no client can be served until node_ids
// covers them all.
type OutsideError struct {
	NodeIDs NodeIDRange
	Brokers []Broker
}

func (e *OutsideError) Error() string {
	var b strings.Builder
	for i, n := range e.Brokers {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "node %d (%s)", n.NodeID, net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))))
	}
	return fmt.Sprintf("cluster: brokers outside cluster.node_ids %d-%d: %s; responses naming them (every Metadata) close the client's connection: widen node_ids",
		e.NodeIDs.Min, e.NodeIDs.Max, b.String())
}

// Check returns an *OutsideError naming the brokers (as a discovery found
// them) that are outside node_ids, or nil.
func (c Config) Check(brokers []Broker) error {
	var out []Broker
	for _, b := range brokers {
		if _, ok := c.Port(b.NodeID); !ok {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &OutsideError{NodeIDs: c.NodeIDs, Brokers: out}
}

// Host is the host rewritten addresses carry: advertised_host, else
// listen's host (with an unspecified one, e.g. 0.0.0.0, kept as is: set
// advertised_host then).
func (c Config) Host(listen string) string {
	if c.AdvertisedHost != "" {
		return c.AdvertisedHost
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	return host
}
