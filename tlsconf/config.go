package tlsconf

import (
	"crypto/tls"
	"time"

	"github.com/kproxy/kproxy/internal/fielderr"
)

// Config is the `tls:` section of kproxy.yaml. A side left out stays
// plaintext, so a file without the section behaves as before.
type Config struct {
	// Listener is TLS from clients to kproxy; nil: plaintext.
	Listener *Listener `yaml:"listener"`
	// Upstream is TLS from kproxy to the broker; nil: plaintext.
	Upstream *Upstream `yaml:"upstream"`
	// ReloadInterval is how often the files are checked for a change
	// (default 10s). Checking is a stat of each file, and a read only when
	// one changed; the kubelet itself updates a Secret volume only every
	// minute or so, so a short interval buys little.
	ReloadInterval time.Duration `yaml:"reload_interval"`
}

// Listener is `tls.listener`: kproxy terminates TLS from its clients.
type Listener struct {
	// CertFile and KeyFile are the certificate (chain, leaf first) and key
	// kproxy presents to clients, in PEM. Required.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile, when set, is the CA bundle (PEM) client certificates
	// must chain to: mTLS. The identities of a verified client
	// certificate are what policy rules match with `principal`.
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is none, request (ask for a certificate and verify it if
	// one is sent; a client without one still connects, with no identity)
	// or require (refuse a client without a valid certificate). Empty:
	// require when client_ca_file is set, else none. request and require
	// need client_ca_file: an unverified certificate is no identity.
	ClientAuth string `yaml:"client_auth"`
	// MinVersion is the lowest TLS version accepted, "1.2" (default) or
	// "1.3".
	MinVersion string `yaml:"min_version"`
	// HandshakeTimeout bounds a client's handshake (default 5s): a
	// client that connects and sends nothing, or stops halfway, is
	// closed then and counted as result="timeout".
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
	// MaxHandshakes bounds the client handshakes in progress at once,
	// apart from proxy.max_connections (0: 256). Past it the handshake
	// that has made no progress the longest is dropped for the newcomer,
	// so idle or half-sent handshakes never lock real clients out. Each
	// handshake in progress reserves 272 KiB of proxy.max_buffered_bytes
	// (the largest handshake message crypto/tls buffers, and a record),
	// and the costly part of a handshake runs on fewer slots than there
	// are CPUs, leaving one to the relays.
	MaxHandshakes int `yaml:"max_handshakes"`
}

// Upstream is `tls.upstream`: kproxy originates TLS to the broker.
type Upstream struct {
	// CAFile is the CA bundle (PEM) the broker's certificate must chain
	// to. Empty: the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are an optional client certificate for brokers
	// that require mTLS; both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the broker's certificate is checked against,
	// and sent as SNI. Empty: the host of the address dialled. SNI is
	// always sent (when the name is a DNS name: TLS has no SNI for IP
	// addresses), also with insecure_skip_verify, since SNI-routed
	// clusters need it.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any broker certificate. For tests only:
	// kproxy logs a warning at start when it is set.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	// HandshakeTimeout bounds the handshake with the broker (default
	// 10s).
	HandshakeTimeout time.Duration `yaml:"handshake_timeout"`
}

// Client authentication modes (Listener.ClientAuth).
const (
	ClientAuthNone    = "none"
	ClientAuthRequest = "request"
	ClientAuthRequire = "require"
)

// DefaultHandshakeTimeout is the upstream handshake bound when none is
// set; DefaultListenerHandshakeTimeout the clients', shorter: a client
// handshake in progress holds kproxy's memory and a handshake slot, and
// a client's first flight takes milliseconds.
const (
	DefaultHandshakeTimeout         = 10 * time.Second
	DefaultListenerHandshakeTimeout = 5 * time.Second
)

// Defaults returns the section as used when kproxy.yaml leaves it out.
func Defaults() Config { return Config{ReloadInterval: 10 * time.Second} }

// Enabled reports whether either side speaks TLS.
func (c Config) Enabled() bool { return c.Listener != nil || c.Upstream != nil }

// Validate reports the first invalid field. It does not open the files:
// Check does, for `kproxy validate` and at start.
func (c Config) Validate() error {
	if c.ReloadInterval < 10*time.Millisecond {
		return fielderr.New("reload_interval", "must be at least 10ms")
	}
	if l := c.Listener; l != nil {
		switch {
		case l.CertFile == "":
			return fielderr.New("listener.cert_file", "is required: the certificate kproxy presents to clients")
		case l.KeyFile == "":
			return fielderr.New("listener.key_file", "is required: the key of listener.cert_file")
		}
		switch l.ClientAuth {
		case "", ClientAuthNone:
		case ClientAuthRequest, ClientAuthRequire:
			if l.ClientCAFile == "" {
				return fielderr.New("listener.client_auth", l.ClientAuth+" needs client_ca_file to verify client certificates against")
			}
		default:
			return fielderr.New("listener.client_auth", "must be none, request or require")
		}
		if _, ok := tlsVersion(l.MinVersion); !ok {
			return fielderr.New("listener.min_version", `must be "1.2" or "1.3"`)
		}
		if l.HandshakeTimeout < 0 {
			return fielderr.New("listener.handshake_timeout", "must not be negative (0: the default, 5s)")
		}
		if l.MaxHandshakes < 0 || l.MaxHandshakes > 100000 {
			return fielderr.New("listener.max_handshakes", "must be 0 (the default, 256) or between 1 and 100000")
		}
	}
	if u := c.Upstream; u != nil {
		switch {
		case u.CertFile != "" && u.KeyFile == "":
			return fielderr.New("upstream.key_file", "is required with upstream.cert_file")
		case u.KeyFile != "" && u.CertFile == "":
			return fielderr.New("upstream.cert_file", "is required with upstream.key_file")
		case u.HandshakeTimeout < 0:
			return fielderr.New("upstream.handshake_timeout", "must not be negative (0: the default, 10s)")
		}
	}
	return nil
}

// Mode is the client_auth in force: client_auth, or its default.
func (l *Listener) Mode() string {
	switch {
	case l.ClientAuth != "":
		return l.ClientAuth
	case l.ClientCAFile != "":
		return ClientAuthRequire
	}
	return ClientAuthNone
}

// Timeout is the handshake bound in force.
func (l *Listener) Timeout() time.Duration {
	if l.HandshakeTimeout == 0 {
		return DefaultListenerHandshakeTimeout
	}
	return l.HandshakeTimeout
}

// Timeout is the handshake bound in force.
func (u *Upstream) Timeout() time.Duration { return orDefault(u.HandshakeTimeout) }

func orDefault(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultHandshakeTimeout
	}
	return d
}

func (l *Listener) clientAuth() tls.ClientAuthType {
	switch l.Mode() {
	case ClientAuthRequire:
		return tls.RequireAndVerifyClientCert
	case ClientAuthRequest:
		return tls.VerifyClientCertIfGiven
	}
	return tls.NoClientCert
}

func tlsVersion(s string) (uint16, bool) {
	switch s {
	case "", "1.2":
		return tls.VersionTLS12, true
	case "1.3":
		return tls.VersionTLS13, true
	}
	return 0, false
}
