package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

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
	s.discoverGap = discoverGap
	s.m.Topo.Store(s.topo)
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

// discoverGap is the least time between two discoveries through the
// bootstrap, and the first backoff after one fails.
const discoverGap = 500 * time.Millisecond

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
// could not be dialled). Asks that come while it waits (a gap after a
// discovery, the backoff after a failed one) are kept in kick's one slot
// and served by one discovery when the wait ends: however many clients
// fail to reach a broker that is down, or wait on a bootstrap that does
// not answer, the bootstrap sees at most one discovery per wait.
func (s *Server) discoverLoop() {
	const most = 30 * time.Second
	gap := s.discoverGap
	backoff := gap
	toldAuth := false
	for {
		// An ask made before this discovery starts is answered by it;
		// a drain before Serve has already stopped everything.
		select {
		case <-s.core.Done():
			return
		default:
		}
		select {
		case <-s.kick:
		default:
		}
		s.topo.Discovering()
		err := s.discover()
		s.topo.Discovered(err)
		result := "ok"
		if err != nil {
			result = "error"
		}
		s.m.Discoveries.WithLabelValues(result).Inc()
		wait := gap
		// A bootstrap that requires SASL will not answer kproxy's
		// Metadata however often it is asked: said once, then the loop
		// waits for asks as after a discovery that worked.
		settled := err == nil || errors.Is(err, cluster.ErrNeedsAuth)
		switch {
		case err != nil && settled:
			ev := s.log.Debug()
			if !toldAuth {
				ev, toldAuth = s.log.Warn(), true
			}
			ev.Err(err).Str("bootstrap", s.cfg.Upstream).Msg("cluster discovery cannot authenticate")
			backoff = gap
		case err != nil:
			s.log.Warn().Err(err).Str("bootstrap", s.cfg.Upstream).Dur("retry_in", backoff).Msg("cluster discovery failed")
			wait = backoff
			backoff = max(gap, min(2*backoff, most))
		default:
			backoff = gap
		}
		timer := time.NewTimer(wait)
		select {
		case <-s.core.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if settled {
			select {
			case <-s.core.Done():
				return
			case <-s.kick:
			}
		}
	}
}

// discover asks the bootstrap for the brokers, over TLS when the upstream
// speaks it.
func (s *Server) discover() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.DialTimeout+s.framing.ReadTimeout)
	defer cancel()
	tc, err := s.dialOwn(ctx, true)
	var auth errAuth
	if errors.As(err, &auth) {
		return fmt.Errorf("authenticating to the bootstrap: %w", auth.error)
	}
	if err != nil {
		return err
	}
	defer tc.Close()
	brokers, err := cluster.Discover(tc, s.framing.MaxResponseBytes)
	if err != nil && s.sasl != nil && errors.Is(err, cluster.ErrNeedsAuth) {
		// Not a listener refusing an unauthenticated discovery: kproxy
		// authenticated, and its clients' Metadata would fare no better.
		return fmt.Errorf("cluster: the bootstrap closed the connection on Metadata after kproxy authenticated to it (%s)", s.sasl.Mechanism())
	}
	if err != nil {
		return err
	}
	s.topo.Learn(brokers)
	if err := s.cluster.Check(brokers); err != nil {
		return err
	}
	s.log.Debug().Int("brokers", len(brokers)).Int("known", s.topo.Nodes()).Msg("cluster discovered through the bootstrap")
	return nil
}
