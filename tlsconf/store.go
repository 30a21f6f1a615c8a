package tlsconf

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Sides, the `side` label of the metrics: the connections the material or
// the handshake is for.
const (
	SideClient   = "client"   // clients -> kproxy (tls.listener)
	SideUpstream = "upstream" // kproxy -> broker (tls.upstream)
)

// Store holds the TLS material in force and keeps it current: it loads the
// files of a Config, then re-reads them every reload_interval when they
// change. New handshakes get the material in force when they start; a
// connection already open keeps what it was set up with. A change that
// does not check out (unparsable, key not matching, expired) is refused:
// the old material stays, with one log line and
// kproxy_tls_reloads_total{result="error"}.
type Store struct {
	cfg     Config
	log     zerolog.Logger
	m       *Metrics
	sources []*source

	mu sync.Mutex // serialises Reload
	// Listener material as last loaded (under mu), and the server config
	// built from it that handshakes use.
	lpair  *pair
	lca    *ca
	server atomic.Pointer[tls.Config]
	// Upstream material; nil when not configured (system roots, no client
	// certificate).
	uca   atomic.Pointer[ca]
	upair atomic.Pointer[pair]

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// New loads the files of a validated Config and starts watching them.
// Material that does not check out at start is an error: kproxy does not
// start without it. m may be nil (no metrics).
func New(cfg Config, m *Metrics, log zerolog.Logger) (*Store, error) {
	s := &Store{cfg: cfg, log: log, m: m, stop: make(chan struct{}), done: make(chan struct{})}
	if l := cfg.Listener; l != nil {
		s.sources = append(s.sources, &source{side: SideClient, fields: []string{"listener.cert_file", "listener.key_file"},
			files: []string{l.CertFile, l.KeyFile},
			apply: func(d [][]byte, now time.Time) (string, error) {
				p, err := parsePair("listener.", l.CertFile, l.KeyFile, d[0], d[1], now)
				if err != nil {
					return "", err
				}
				s.lpair = p
				s.m.expiry(SideClient, l.CertFile, p.notAfter)
				s.buildServer()
				return p.String(), nil
			}})
		if l.ClientCAFile != "" {
			s.sources = append(s.sources, &source{side: SideClient, fields: []string{"listener.client_ca_file"},
				files: []string{l.ClientCAFile},
				apply: func(d [][]byte, _ time.Time) (string, error) {
					c, err := parseCA("listener.client_ca_file", l.ClientCAFile, d[0])
					if err != nil {
						return "", err
					}
					s.lca = c
					s.m.expiry(SideClient, l.ClientCAFile, c.notAfter)
					s.buildServer()
					return c.String(), nil
				}})
		}
	}
	if u := cfg.Upstream; u != nil {
		if u.CAFile != "" {
			s.sources = append(s.sources, &source{side: SideUpstream, fields: []string{"upstream.ca_file"},
				files: []string{u.CAFile},
				apply: func(d [][]byte, _ time.Time) (string, error) {
					c, err := parseCA("upstream.ca_file", u.CAFile, d[0])
					if err != nil {
						return "", err
					}
					s.uca.Store(c)
					s.m.expiry(SideUpstream, u.CAFile, c.notAfter)
					return c.String(), nil
				}})
		}
		if u.CertFile != "" {
			s.sources = append(s.sources, &source{side: SideUpstream, fields: []string{"upstream.cert_file", "upstream.key_file"},
				files: []string{u.CertFile, u.KeyFile},
				apply: func(d [][]byte, now time.Time) (string, error) {
					p, err := parsePair("upstream.", u.CertFile, u.KeyFile, d[0], d[1], now)
					if err != nil {
						return "", err
					}
					s.upair.Store(p)
					s.m.expiry(SideUpstream, u.CertFile, p.notAfter)
					return p.String(), nil
				}})
		}
		if u.InsecureSkipVerify {
			log.Warn().Msg("tls.upstream.insecure_skip_verify is set: the broker's certificate is not checked, so anyone on the path can read and change the traffic")
		}
	}
	now := time.Now()
	for _, src := range s.sources {
		if _, err := src.poll(now); err != nil {
			return nil, err
		}
		log.Info().Str("field", "tls."+src.fields[0]).Strs("files", src.files).Str("in_force", src.inForce).Msg("TLS files loaded")
	}
	if len(s.sources) == 0 {
		close(s.done)
		return s, nil
	}
	go s.watch()
	return s, nil
}

// Config is the configuration the store was built from (for the
// handshake timeouts).
func (s *Store) Config() Config { return s.cfg }

// Close stops watching the files. The configs handed out keep working
// with the material last loaded.
func (s *Store) Close() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		close(s.stop)
		<-s.done
	})
}

func (s *Store) watch() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Reload()
		}
	}
}

// Reload checks the files now, as the watcher does every reload_interval
// (cmd/kproxy may call it on SIGHUP), and applies what changed. It returns
// the refusals, joined; each was logged and counted.
func (s *Store) Reload() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	now := time.Now()
	for _, src := range s.sources {
		changed, err := src.poll(now)
		if !changed {
			continue
		}
		if err != nil {
			s.m.reload(src.side, "error")
			s.log.Error().Err(err).Str("field", "tls."+fieldOf(err, src.fields[0])).
				Msg("TLS files changed but were refused; the previous certificate stays in force")
			errs = append(errs, err)
			continue
		}
		s.m.reload(src.side, "ok")
		s.log.Info().Str("field", "tls."+src.fields[0]).Strs("files", src.files).Str("in_force", src.inForce).Msg("TLS files reloaded")
	}
	return errors.Join(errs...)
}

func fieldOf(err error, def string) string {
	var fe *fileError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return def
}

// buildServer publishes the server config for the listener material in
// force. Called under mu (or from New).
func (s *Store) buildServer() {
	if s.lpair == nil {
		return // the pair loads first; the CA's turn comes after
	}
	l := s.cfg.Listener
	v, _ := tlsVersion(l.MinVersion)
	c := &tls.Config{
		Certificates: []tls.Certificate{*s.lpair.cert},
		MinVersion:   v,
		ClientAuth:   l.clientAuth(),
	}
	if s.lca != nil && c.ClientAuth != tls.NoClientCert {
		// crypto/tls checks a resumed session's chain against the
		// ClientCAs in force too, so a CA rotated out is out for
		// resumptions as well.
		c.ClientCAs = s.lca.pool
	}
	s.server.Store(c)
}

// ServerConfig is the config for the listener: every handshake takes the
// certificate, client CA and client_auth in force when it starts. nil when
// tls.listener is not set (or s is nil).
func (s *Store) ServerConfig() *tls.Config {
	if s == nil || s.cfg.Listener == nil {
		return nil
	}
	v, _ := tlsVersion(s.cfg.Listener.MinVersion)
	return &tls.Config{
		MinVersion: v,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.server.Load(), nil
		},
	}
}

// ClientConfig is a config for one dial to the upstream at hostPort: the
// CA and client certificate in force, and the server name to check and
// send as SNI (upstream.server_name, else the host dialled). nil when
// tls.upstream is not set (or s is nil). Call it for each dial.
func (s *Store) ClientConfig(hostPort string) *tls.Config {
	if s == nil || s.cfg.Upstream == nil {
		return nil
	}
	u := s.cfg.Upstream
	name := u.ServerName
	if name == "" {
		name = hostPort
		if h, _, err := net.SplitHostPort(hostPort); err == nil {
			name = h
		}
	}
	c := &tls.Config{
		ServerName:         name,
		InsecureSkipVerify: u.InsecureSkipVerify,
		MinVersion:         tls.VersionTLS12,
	}
	if ca := s.uca.Load(); ca != nil {
		c.RootCAs = ca.pool
	}
	if u.CertFile != "" {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.upair.Load().cert, nil
		}
	}
	return c
}

// Serial is the serial number of the listener certificate in force, for a
// log line after a reload, and tests.
func (s *Store) Serial() string {
	if s == nil {
		return ""
	}
	if c := s.server.Load(); c != nil {
		return c.Certificates[0].Leaf.SerialNumber.Text(16)
	}
	return ""
}
