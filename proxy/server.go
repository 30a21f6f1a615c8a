package proxy

import (
	"context"
	"errors"
	"fmt"
	"github.com/kproxy/kproxy/audit"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/proxy/loop"
	"github.com/kproxy/kproxy/proxy/stream"
	"github.com/kproxy/kproxy/relay"
	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/telemetry"
	"github.com/kproxy/kproxy/tracing"
)

// Server is one kproxy: its listeners, the connection core they share,
// and the driver that relays them (netpoll's event loop for plaintext,
// the stream driver when either side speaks TLS).
type Server struct {
	cfg     Config
	framing framing.Config
	log     zerolog.Logger
	m       *Metrics
	tracer  *tracing.Tracer
	topics  *framing.TopicIDs // learnt from Metadata when something reads topics
	// env is what the connections' sessions share.
	env *relay.Env
	// core is the registry, budget, opening sequence and close path of
	// every connection, whichever driver relays it.
	core *core.Core
	// poll relays plaintext connections; streams TLS ones (set by SetTLS).
	poll    *loop.Driver
	streams *stream.Driver

	policies atomic.Pointer[policy.Engine]

	// main is proxy.listen's port; nodes are the node ports in cluster
	// mode, where topo is what kproxy knows of the cluster and kick asks
	// discoverLoop for a discovery.
	main    *listener
	nodes   []*listener
	cluster cluster.Config
	topo    *cluster.Topology
	kick    chan struct{}
	// discoverGap is discoverGap, or what a test sets.
	discoverGap time.Duration

	// sasl, when set, authenticates every upstream connection (see
	// SetSasl).
	sasl *sasl.Originator
	// tls, when it speaks TLS on either side, has the listeners'
	// connections relayed by the stream driver, accepted on Go's net.
	tls *stream.TLS
	// ready shares one readiness check between concurrent callers.
	ready readiness
}

// New checks the sections it relies on and returns a Server that is not yet
// listening.
// tracer may be nil (no tracing).
func New(cfg Config, fr framing.Config, tc correlate.Config, log zerolog.Logger, m *Metrics, tracer *tracing.Tracer) (*Server, error) {
	for _, err := range []error{cfg.Validate(), fr.Validate(), tc.Validate()} {
		if err != nil {
			return nil, err
		}
	}
	frame := max(fr.MaxRequestBytes, fr.MaxResponseBytes) + framing.SizeLen
	if cfg.MaxUnreadBytes < frame {
		return nil, fmt.Errorf("max_unread_bytes %d must hold one maximum-size frame (%d)", cfg.MaxUnreadBytes, frame)
	}
	if cfg.MaxBufferedBytes != 0 && cfg.MaxBufferedBytes < frame {
		return nil, fmt.Errorf("max_buffered_bytes %d must hold one maximum-size frame (%d)", cfg.MaxBufferedBytes, frame)
	}
	if cfg.MaxBufferedBytes == 0 {
		n, from := defaultMaxBufferedBytes(os.DirFS("/"))
		cfg.MaxBufferedBytes = max(n, frame)
		log.Info().Int("max_buffered_bytes", cfg.MaxBufferedBytes).Str("from", from).Msg("process-wide buffer budget")
	}
	s := &Server{cfg: cfg, framing: fr, log: log, m: m, tracer: tracer, topics: framing.NewTopicIDs()}
	s.env = &relay.Env{Framing: fr, Table: tc, Metrics: m.Relay, Tracer: tracer, Topics: s.topics,
		Policies: &s.policies, Listener: cfg.Listen, MaxUnread: cfg.MaxUnreadBytes, Rack: relay.NewRack(cfg.ClientRack)}
	if cfg.ClientRack != "" {
		log.Info().Str("client_rack", cfg.ClientRack).Msg("filling the rack id of Fetch requests that carry none")
	}
	s.core = core.New(core.Limits{MaxConnections: cfg.MaxConnections, MaxUnreadBytes: cfg.MaxUnreadBytes,
		MaxBufferedBytes: cfg.MaxBufferedBytes, DialTimeout: cfg.DialTimeout, ReadTimeout: fr.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout, Linger: cfg.Linger}, s.env, log, m)
	s.core.Sockets = core.Sockets{Send: cfg.SocketSendBufferBytes, Recv: cfg.SocketReceiveBufferBytes,
		LargeSend: cfg.LargeFrameSendBufferBytes, Log: log}
	s.poll = loop.New(s.core)
	return s, nil
}

// SetPolicies puts a new rule set in force; live connections apply it from
// their next request on.
func (s *Server) SetPolicies(e *policy.Engine) { s.policies.Store(e) }

// SetAudit makes the server write an audit line for every request that
// changes cluster state and every policy refusal (audit.enabled). Call it
// before Listen; nil leaves the log off.
func (s *Server) SetAudit(l *audit.Log) { s.env.Audit = l }

// SetLag makes the server measure consumer lag from the Fetch traffic
// (telemetry.lag). Call it before Listen; nil leaves it off.
func (s *Server) SetLag(l *telemetry.Lag) { s.env.Lag = l }

// SetClients makes the server answer the client telemetry APIs itself
// and export what clients push (telemetry.clients). Call it before
// Listen; nil leaves them to the broker.
func (s *Server) SetClients(c *telemetry.Clients) { s.env.Clients = c }

// SetSasl makes the server authenticate every upstream connection itself
// (sasl.upstream) before relaying the client's first byte, and
// re-authenticate it before the broker's session expires. Clients then
// connect without SASL: theirs is refused, and the SASL APIs are left out
// of what they are offered. Call it before Listen; nil or off does
// nothing.
func (s *Server) SetSasl(o *sasl.Originator) {
	if !o.On() {
		return
	}
	s.sasl = o
	s.env.Originate(o.Origination(s.framing.MaxResponseBytes))
}

// Listen binds the client port, and in cluster mode every node port.
func (s *Server) Listen() error {
	l, err := s.bind(s.cfg.Listen, bootstrapNode)
	if err != nil {
		return err
	}
	s.main = l
	if err := s.bindNodes(); err != nil {
		for _, l := range s.listeners() {
			l.close()
		}
		s.main, s.nodes = nil, nil
		return err
	}
	return nil
}

// listeners are every port bound.
func (s *Server) listeners() []*listener {
	if s.main == nil {
		return nil
	}
	return append([]*listener{s.main}, s.nodes...)
}

// Addr is the bound client address (after Listen): the bootstrap
// listener's in cluster mode.
func (s *Server) Addr() net.Addr { return s.main.Addr() }

// Serve relays clients until Drain ends it: on the netpoll event loop, or
// with the stream driver when TLS is on.
func (s *Server) Serve() error {
	ev := s.log.Info().Str("listen", s.Addr().String()).Str("upstream", s.cfg.Upstream).
		Bool("tls_client", s.tls.ClientTLS()).Bool("tls_upstream", s.tls.UpstreamTLS())
	if s.topo != nil {
		ev = ev.Int("node_port_base", s.cluster.NodePortBase).Int32("node_id_min", s.cluster.NodeIDs.Min).
			Int32("node_id_max", s.cluster.NodeIDs.Max).Str("advertised_host", s.cluster.Host(s.cfg.Listen))
	}
	ev.Msg("kproxy listening")
	if !s.tls.On() {
		s.poll.Start()
	}
	if s.topo != nil {
		go s.discoverLoop()
	}
	for _, l := range s.nodes {
		go func() {
			if err := l.serve(); err != nil {
				s.log.Error().Err(err).Str("listen", l.addr).Msg("node port stopped accepting")
			}
		}()
	}
	err := s.main.serve()
	s.core.Shutdown()
	return err
}

// Ready reports why the server should not get traffic, or nil: the
// upstream (the cluster's bootstrap) must answer, and in cluster mode the
// brokers must be known. One check runs at a time and every caller
// waiting meanwhile shares its result, which is reused for readyCache: a
// burst of probes (many replicas of a scraper, a hostile caller of
// /readyz) costs the broker one connection, and one login, not one each.
func (s *Server) Ready(ctx context.Context) error {
	if s.main == nil {
		return errors.New("not listening")
	}
	if s.core.Draining() {
		return errors.New("draining")
	}
	return s.ready.check(ctx, s.checkReady)
}

// checkReady is one readiness check.
func (s *Server) checkReady(ctx context.Context) error {
	switch {
	case s.main == nil:
		return errors.New("not listening")
	case s.core.Draining():
		return errors.New("draining")
	}
	if s.tls.On() || s.sasl != nil {
		var auth errAuth
		if err := s.readyStream(ctx); errors.As(err, &auth) {
			return fmt.Errorf("upstream %s: authentication (%s) failing: %w", s.cfg.Upstream, s.sasl.Mechanism(), auth.error)
		} else if err != nil {
			return fmt.Errorf("upstream %s unreachable: %w", s.cfg.Upstream, err)
		}
		if err := s.sasl.Ready(); err != nil {
			return fmt.Errorf("upstream authentication failing: %w", err)
		}
	} else {
		var d net.Dialer
		ctx, cancel := context.WithTimeout(ctx, min(s.cfg.DialTimeout, 2*time.Second))
		defer cancel()
		c, err := d.DialContext(ctx, "tcp", s.cfg.Upstream)
		if err != nil {
			return fmt.Errorf("upstream %s unreachable: %w", s.cfg.Upstream, err)
		}
		c.Close()
	}
	if s.topo != nil {
		return s.topo.Ready()
	}
	return nil
}

// Draining reports whether Drain has started.
func (s *Server) Draining() bool { return s.core.Draining() }

// Drain turns new clients away, lets every connection finish its
// in-flight requests and closes it, closes whatever is left when ctx
// ends, and stops the listeners. netpoll's own Shutdown would close every
// connection that is idle at that moment, in-flight requests or not, so
// it runs last.
func (s *Server) Drain(ctx context.Context) error {
	err := s.core.Drain(ctx)
	if errors.Is(err, core.ErrAlreadyDraining) {
		return err
	}
	s.stopLoop()
	return err
}

func (s *Server) stopLoop() {
	s.core.Shutdown()
	shutdownAll(s.listeners())
}
