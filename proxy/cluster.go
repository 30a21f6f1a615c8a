package proxy

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/cluster"
)

// SetCluster makes the server front a whole cluster: proxy.listen becomes
// the bootstrap listener, every node id of cfg gets a port of its own, and
// responses have their broker addresses rewritten to those ports. Call it
// before Listen; without it the server fronts one broker.
func (s *Server) SetCluster(cfg cluster.Config) error {
	if !cfg.On() {
		return nil
	}
	if err := cfg.Validate(s.cfg.Listen); err != nil {
		return err
	}
	s.cluster = cfg
	s.topo = cluster.NewTopology(cfg, s.log)
	s.env.Addresses = cluster.NewFronting(cfg, cfg.Host(s.cfg.Listen), s.topo)
	s.kick = make(chan struct{}, 1)
	s.m.topo.Store(s.topo)
	return nil
}

// Topology is what the server knows of the cluster it fronts (nil when it
// fronts one broker).
func (s *Server) Topology() *cluster.Topology { return s.topo }

// bindNodes opens a port for every node id, all before serving: ports are
// deterministic, so a client whose cached metadata names a node finds it
// after a restart, and one that kproxy has not learnt yet is held until a
// discovery through the bootstrap names it.
func (s *Server) bindNodes() error {
	if s.topo == nil {
		return nil
	}
	host, _, err := net.SplitHostPort(s.cfg.Listen)
	if err != nil {
		return err
	}
	for node := s.cluster.NodeIDs.Min; ; node++ {
		port, _ := s.cluster.Port(node)
		l, err := s.bind(net.JoinHostPort(host, strconv.Itoa(port)), node)
		if err != nil {
			return err
		}
		s.nodes = append(s.nodes, l)
		if node == s.cluster.NodeIDs.Max {
			return nil
		}
	}
}

// rediscover asks for a discovery soon, without waiting for it.
func (s *Server) rediscover() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// discoverLoop learns the cluster's brokers through the bootstrap at
// start, retrying with a backoff until it works, and again whenever
// rediscover asks (a client on a node port not learnt, a broker that
// could not be dialled).
func (s *Server) discoverLoop() {
	const first, most = 500 * time.Millisecond, 30 * time.Second
	backoff := first
	for {
		err := s.discover()
		s.topo.Discovered(err)
		result := "ok"
		if err != nil {
			result = "error"
		}
		s.m.discoveries.WithLabelValues(result).Inc()
		var timer *time.Timer
		var wait <-chan time.Time
		if err != nil {
			s.log.Warn().Err(err).Str("bootstrap", s.cfg.Upstream).Dur("retry_in", backoff).Msg("cluster discovery failed")
			timer = time.NewTimer(backoff)
			wait = timer.C
			backoff = min(2*backoff, most)
		} else {
			backoff = first
		}
		select {
		case <-s.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-s.kick:
		case <-wait:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// discover asks the bootstrap for the brokers, over TLS when the upstream
// speaks it.
func (s *Server) discover() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DialTimeout+s.framing.ReadTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.cfg.Upstream)
	if err != nil {
		return err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	tc, err := s.tls.dial(c, s.cfg.Upstream, dl, false)
	if err != nil {
		return err
	}
	brokers, err := cluster.Discover(tc, s.framing.MaxResponseBytes)
	if err != nil {
		return err
	}
	s.topo.Learn(brokers)
	s.log.Debug().Int("brokers", len(brokers)).Int("known", s.topo.Nodes()).Msg("cluster discovered through the bootstrap")
	return nil
}

// unknownNode refuses a client of a node port whose broker kproxy could
// not learn in time.
func (s *Server) unknownNode(log *zerolog.Logger, l *listener, err error) {
	s.m.refused.WithLabelValues("unknown_node").Inc()
	log.Warn().Err(err).Int32("node", l.node).Str("listen", l.addr).Msg("connection refused: its node is not a known broker; the client should refresh its metadata")
}
