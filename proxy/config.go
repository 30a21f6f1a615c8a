package proxy

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/kproxy/kproxy/internal/fielderr"
	"github.com/kproxy/kproxy/proxy/core"
)

// Config is the `proxy:` section of kproxy.yaml.
type Config struct {
	// Listen is where clients connect.
	Listen string `yaml:"listen"`
	// Upstream is the broker port kproxy fronts.
	Upstream string `yaml:"upstream"`
	// DialTimeout bounds connecting to the upstream for a new client.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// WriteTimeout is how long a write to a peer may make no progress
	// (the peer has stopped reading) before the pair is closed. It bounds
	// a stall, not a whole write: a consumer reading a large response
	// slowly but steadily is never cut off.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MaxConnections caps open client connections; more are refused.
	MaxConnections int `yaml:"max_connections"`
	// MaxUnreadBytes caps the bytes one side may have sent that kproxy has
	// not relayed yet. netpoll reads without backpressure, so a peer that
	// outruns the other side is closed at this bound instead of growing
	// memory without limit. It must hold at least one maximum-size frame.
	MaxUnreadBytes int `yaml:"max_unread_bytes"`
	// MaxBufferedBytes caps the bytes all connections together hold in
	// partial frames, unread input and batches waiting for a slow peer;
	// when a connection would take the total past it, the connection
	// holding the most is closed, and the others keep what they hold. 0
	// (the default) derives it at start: half the container's memory
	// limit (cgroup v2 memory.max, else v1 memory.limit_in_bytes) where
	// there is one, else 1 GiB, and never less than one maximum-size
	// frame. A value set must hold one
	// maximum-size frame; below max_unread_bytes it closes a single
	// connection earlier than max_unread_bytes would. kproxy also sets
	// Go's soft memory limit from it (LimitMemory) unless GOMEMLIMIT is
	// set.
	MaxBufferedBytes int `yaml:"max_buffered_bytes"`
	// DrainTimeout is how long a shutdown waits for in-flight requests.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// Linger is how long a relay goroutine waits for the next frame after
	// relaying a batch before handing the connection back to the poller.
	// 0 (the default) hands back at once and lets the poller relay every
	// batch that cannot block itself, which is faster and uses less CPU;
	// a linger keeps one goroutine per busy connection instead, which
	// avoids netpoll's one small allocation per dispatch.
	Linger time.Duration `yaml:"linger"`
	// SocketSendBufferBytes is SO_SNDBUF on every client and upstream
	// socket kproxy opens. 0 (the default) leaves it to the kernel,
	// which grows a send buffer up to net.ipv4.tcp_wmem's maximum (4 MiB
	// by default). Fixed at 524288, kproxy relayed 1 MiB Produce frames
	// 10-17% faster with about 10% less CPU per request, but one
	// connection with 64 small requests in flight up to 10% slower with
	// 13% more CPU (docs/benchmarks/round-2.md, "1 MiB frames"): set it
	// where large frames dominate.
	// 1 MiB and more did no better than the kernel's sizing. The kernel
	// doubles the value for its own bookkeeping and caps it at
	// net.core.wmem_max, a host-wide setting a pod cannot raise (212992
	// on a stock kernel); kproxy logs once when it was capped. Kafka's
	// own clients and brokers set 128 KiB and 100 KiB. 0, or 4096 to 256
	// MiB.
	SocketSendBufferBytes int `yaml:"socket_send_buffer_bytes"`
	// SocketReceiveBufferBytes is SO_RCVBUF on the same sockets. 0 (the
	// default) leaves it to the kernel, which grows it as a connection
	// needs: a fixed receive buffer also fixes the TCP window, and 512
	// KiB made 1 MiB frames 15% slower; a few KiB, below one segment,
	// makes a connection crawl. Capped by net.core.rmem_max as above.
	// 0, or 4096 to 256 MiB.
	SocketReceiveBufferBytes int `yaml:"socket_receive_buffer_bytes"`
	// LargeFrameSendBufferBytes is SO_SNDBUF set on an upstream socket
	// the first time kproxy writes more than 64 KiB to it at once (a
	// large request frame), so that only connections that carry large
	// frames get a fixed send buffer. 524288 (the default) relayed 1 MiB
	// Produce frames faster (see socket_send_buffer_bytes) without the
	// cost to small requests. Capped by net.core.wmem_max as above.
	// Plaintext only (the netpoll path); 0 turns it off; else 4096 to
	// 256 MiB.
	LargeFrameSendBufferBytes int `yaml:"large_frame_send_buffer_bytes"`
	// ClientRack is the zone kproxy's pod runs in (KIP-392). When set,
	// kproxy fills it into the rack_id of Fetch requests (v11+) whose
	// client left it empty, so that brokers running
	// RackAwareReplicaSelector serve the client from a replica in its own
	// zone; a client's own rack id is never replaced. KPROXY_CLIENT_RACK,
	// when set and not empty, wins (kproxy-inject sets it from the pod's
	// zone). Read at start; up to 255 bytes.
	ClientRack string `yaml:"client_rack"`
}

// ClientRackEnv is the variable that sets client_rack over the file.
const ClientRackEnv = "KPROXY_CLIENT_RACK"

// maxClientRack bounds client_rack: zone names are short, and the field
// is added to every Fetch request.
const maxClientRack = 255

// ApplyEnv sets the fields the environment overrides, read through
// getenv (os.Getenv): client_rack from KPROXY_CLIENT_RACK.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if v := strings.TrimSpace(getenv(ClientRackEnv)); v != "" {
		c.ClientRack = v
	}
}

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config {
	return Config{
		Listen:         "127.0.0.1:9092",
		DialTimeout:    5 * time.Second,
		WriteTimeout:   30 * time.Second,
		MaxConnections: 10000,
		MaxUnreadBytes: 128 << 20,
		DrainTimeout:   20 * time.Second,

		LargeFrameSendBufferBytes: 512 << 10,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if err := fielderr.HostPort("listen", c.Listen); err != nil {
		return err
	}
	if c.Upstream == "" {
		return fielderr.New("upstream", "is required: the broker's HOST:PORT (or pass --upstream)")
	}
	if err := fielderr.HostPort("upstream", c.Upstream); err != nil {
		return err
	}
	switch {
	case c.DialTimeout <= 0:
		return fielderr.New("dial_timeout", "must be positive")
	case c.WriteTimeout <= 0:
		return fielderr.New("write_timeout", "must be positive")
	case c.MaxConnections < 1:
		return fielderr.New("max_connections", "must be at least 1")
	case c.MaxUnreadBytes < 1<<10:
		return fielderr.New("max_unread_bytes", "must be at least 1024")
	case c.MaxBufferedBytes != 0 && c.MaxBufferedBytes < 1<<10:
		return fielderr.New("max_buffered_bytes", "must be 0 (derived from the memory limit) or at least 1024")
	case c.DrainTimeout < 0:
		return fielderr.New("drain_timeout", "must not be negative")
	case c.Linger < 0 || c.Linger > time.Second:
		return fielderr.New("linger", "must be between 0 and 1s")
	case c.SocketSendBufferBytes != 0 && (c.SocketSendBufferBytes < core.MinSocketBuffer || c.SocketSendBufferBytes > core.MaxSocketBuffer):
		return fielderr.New("socket_send_buffer_bytes", "must be 0 (the kernel's own sizing) or between 4096 and 268435456")
	case c.SocketReceiveBufferBytes != 0 && (c.SocketReceiveBufferBytes < core.MinSocketBuffer || c.SocketReceiveBufferBytes > core.MaxSocketBuffer):
		return fielderr.New("socket_receive_buffer_bytes", "must be 0 (the kernel's own sizing) or between 4096 and 268435456")
	case c.LargeFrameSendBufferBytes != 0 && (c.LargeFrameSendBufferBytes < core.MinSocketBuffer || c.LargeFrameSendBufferBytes > core.MaxSocketBuffer):
		return fielderr.New("large_frame_send_buffer_bytes", "must be 0 (off) or between 4096 and 268435456")
	case len(c.ClientRack) > maxClientRack:
		return fielderr.New("client_rack", fmt.Sprintf("is %d bytes: at most %d", len(c.ClientRack), maxClientRack))
	case c.ClientRack != strings.TrimSpace(c.ClientRack) || strings.ContainsFunc(c.ClientRack, unicode.IsControl):
		return fielderr.New("client_rack", fmt.Sprintf("%q has surrounding spaces or control characters", c.ClientRack))
	}
	return nil
}
