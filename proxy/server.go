package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/cluster"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/relay"
	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/tracing"
)

// Server accepts clients and runs their pairs.
type Server struct {
	cfg     Config
	framing framing.Config
	table   correlate.Config
	log     zerolog.Logger
	m       *Metrics
	tracer  *tracing.Tracer
	topics  *framing.TopicIDs // learnt from Metadata when something reads topics
	// env is what the pairs' sessions share.
	env *relay.Env
	// inline lets runTask relay batches on the poller; a linger keeps
	// a goroutine per busy connection instead.
	inline bool

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

	draining atomic.Bool
	// tls, when it speaks TLS on either side, has the listeners' pairs
	// relayed by the stream driver, accepted on Go's net.
	tls *serverTLS
	// sockets sizes the socket buffers of every pair.
	sockets socketBuffers

	mu      sync.Mutex
	pairs   map[*pair]struct{}
	streams map[*stream]struct{}
	// budget counts the bytes all pairs hold against max_buffered_bytes.
	budget budget
	// slots counts the clients paired or being paired (their upstream
	// dial under way) against max_connections.
	slots atomic.Int64
	idle  chan struct{} // closed when draining and the last pair closes

	// waiting lists the pairs the overflow sweep checks (see waitStart).
	waitMu   sync.Mutex
	waiting  []*pair
	waitKick chan struct{} // one slot, made by New: the list is no longer empty

	stop      chan struct{} // closed when the event loop stops
	stopOnce  sync.Once
	watchOnce sync.Once
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
	s := &Server{cfg: cfg, framing: fr, table: tc, log: log, m: m, tracer: tracer, topics: framing.NewTopicIDs(), inline: cfg.Linger == 0,
		pairs: make(map[*pair]struct{}), streams: make(map[*stream]struct{}), idle: make(chan struct{}), stop: make(chan struct{}),
		waitKick: make(chan struct{}, 1)}
	s.env = &relay.Env{Framing: fr, Table: tc, Metrics: m.relay, Tracer: tracer, Topics: s.topics,
		Policies: &s.policies, Listener: cfg.Listen, MaxUnread: cfg.MaxUnreadBytes}
	s.budget.max = int64(cfg.MaxBufferedBytes)
	s.sockets = socketBuffers{send: cfg.SocketSendBufferBytes, recv: cfg.SocketReceiveBufferBytes,
		largeSend: cfg.LargeFrameSendBufferBytes, log: log}
	m.budgetUsed.Store(&s.budget.used)
	return s, nil
}

// SetPolicies puts a new rule set in force; live connections apply it from
// their next request on.
func (s *Server) SetPolicies(e *policy.Engine) { s.policies.Store(e) }

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
		Bool("tls_client", s.tls.clientTLS()).Bool("tls_upstream", s.tls.upstreamTLS())
	if s.topo != nil {
		ev = ev.Int("node_port_base", s.cluster.NodePortBase).Int32("node_id_min", s.cluster.NodeIDs.Min).
			Int32("node_id_max", s.cluster.NodeIDs.Max).Str("advertised_host", s.cluster.Host(s.cfg.Listen))
	}
	ev.Msg("kproxy listening")
	if !s.tls.on() {
		s.watchOnce.Do(func() { go s.watchOverflow() })
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
	s.stopOnce.Do(func() { close(s.stop) })
	return err
}

// Ready reports why the server should not get traffic, or nil: the
// upstream (the cluster's bootstrap) must answer, and in cluster mode the
// brokers must be known.
func (s *Server) Ready(ctx context.Context) error {
	switch {
	case s.main == nil:
		return errors.New("not listening")
	case s.draining.Load():
		return errors.New("draining")
	}
	if s.tls.on() || s.sasl != nil {
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
func (s *Server) Draining() bool { return s.draining.Load() }

// Drain turns new clients away, lets every pair finish its in-flight
// requests and closes it, closes whatever is left when ctx ends, and stops
// the event loop. netpoll's own Shutdown would close every connection that
// is idle at that moment, in-flight requests or not, so it runs last.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	if !s.draining.CompareAndSwap(false, true) {
		s.mu.Unlock()
		return errors.New("already draining")
	}
	n := len(s.pairs) + len(s.streams)
	live := make([]*pair, 0, len(s.pairs))
	for p := range s.pairs {
		live = append(live, p)
	}
	streams := make([]*stream, 0, len(s.streams))
	for st := range s.streams {
		streams = append(streams, st)
	}
	if n == 0 {
		close(s.idle)
	}
	s.mu.Unlock()
	s.log.Info().Int("connections", n).Msg("draining")
	for _, p := range live {
		p.drain()
	}
	for _, st := range streams {
		st.drain()
	}
	defer s.stopLoop()
	select {
	case <-s.idle:
		s.log.Info().Msg("drained")
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	live = live[:0]
	for p := range s.pairs {
		live = append(live, p)
	}
	streams = streams[:0]
	for st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	for _, p := range live {
		p.close(reasonDrainTimeout, nil)
	}
	for _, st := range streams {
		st.close(reasonDrainTimeout, nil)
	}
	s.log.Warn().Int("connections", len(live)+len(streams)).Msg("drain timeout: closed connections with requests in flight")
	return ctx.Err()
}

func (s *Server) stopLoop() {
	s.stopOnce.Do(func() { close(s.stop) })
	shutdownAll(s.listeners())
}

// reserve takes a max_connections slot for a new client before its
// upstream is dialled, so a client refused for want of one costs no
// upstream connection (every upstream connection comes from kproxy's
// address, and a broker's per-IP quotas would then hit every client). It
// says why not, or "". The slot is given back by unreserve, or by remove
// once the client is paired.
func (s *Server) reserve() string {
	if s.draining.Load() {
		return "draining"
	}
	for {
		n := s.slots.Load()
		if n >= int64(s.cfg.MaxConnections) {
			return "max_connections"
		}
		if s.slots.CompareAndSwap(n, n+1) {
			return ""
		}
	}
}

// unreserve gives back a slot taken by reserve for a client not paired.
func (s *Server) unreserve() { s.slots.Add(-1) }

// register adds c (a *pair or a *stream), whose slot reserve took, to m
// unless the server is draining, and says why not.
func register[C comparable](s *Server, m map[C]struct{}, c C) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		return "draining"
	}
	m[c] = struct{}{}
	s.m.open.Inc()
	s.m.accepted.Inc()
	return ""
}

// unregister removes c from m, gives back its slot, and ends a drain that
// waited for it.
func unregister[C comparable](s *Server, m map[C]struct{}, c C) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := m[c]; !ok {
		return
	}
	delete(m, c)
	s.unreserve()
	if s.draining.Load() && len(s.pairs)+len(s.streams) == 0 {
		close(s.idle)
	}
}

// turnAway counts and logs a client refused for why.
func (s *Server) turnAway(log *zerolog.Logger, why string) {
	s.m.refused.WithLabelValues(why).Inc()
	log.Warn().Str("reason", why).Msg("connection refused")
}
