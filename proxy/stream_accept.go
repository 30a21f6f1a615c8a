package proxy

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/relay"
	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/tracing"
)

// serveStreams accepts clients on l, a listener of Go's net, until it is
// closed, each relayed by a stream pair.
func (s *Server) serveStreams(l *listener) error {
	for {
		c, err := l.sln.Accept()
		if err != nil {
			select {
			case <-s.stop:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			// Out of file descriptors and the like: the listener stays,
			// and accepting resumes once the cause passes.
			s.log.Error().Err(err).Msg("accept failed")
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go s.onStream(l, c)
	}
}

// onStream pairs a client accepted by serveStreams: the TLS handshake
// with it (bounded by the handshake timeout), the upstream dial with its
// own handshake, then a stream pair relays until either side closes.
func (s *Server) onStream(l *listener, raw net.Conn) {
	log := s.log.With().Str("client", raw.RemoteAddr().String()).Logger()
	if why := s.reserve(); why != "" {
		resetConn(raw)
		s.turnAway(&log, why)
		return
	}
	s.sockets.setNet(raw)
	client, names, err := s.tls.accept(raw)
	if err != nil {
		s.unreserve()
		raw.Close()
		log.Warn().Err(err).Msg("connection closed")
		return
	}
	addr, err := l.upstream(context.Background())
	if err != nil {
		s.unreserve()
		resetConn(raw)
		s.unknownNode(&log, l, err)
		return
	}
	up, err := s.dialStream(context.Background(), log, addr)
	if err != nil {
		s.unreserve()
		resetConn(raw)
		l.dialFailed()
		return
	}
	var auth sasl.Result
	if s.sasl != nil {
		if auth, err = s.authenticate(up, addr, &log); err != nil {
			up.Close()
			s.unreserve()
			resetConn(raw)
			return
		}
	}
	plog := log.With().Str("upstream", up.LocalAddr().String()+">"+addr)
	var peer *tracing.Peer
	if s.tracer.On() {
		peer = tracing.NewPeer(raw.RemoteAddr().String(), addr, s.topics)
	}
	if len(names) > 0 {
		plog = plog.Str("principal", names[0])
		peer.SetPrincipal(names[0])
	}
	if s.sasl != nil {
		plog = plog.Str("upstream_principal", auth.Principal)
	}
	st := newStream(s, plog.Logger(), client, up)
	st.sess = relay.New(l.env, st, st.log, peer)
	if s.sasl != nil {
		s.armSasl(st.sess, peer, addr, auth)
	}
	st.sess.SetPrincipals(names)
	if why := register(s, s.streams, st); why != "" {
		s.unreserve()
		resetConn(raw)
		up.Close()
		s.turnAway(&log, why)
		return
	}
	st.log.Info().Bool("tls_client", s.tls.clientTLS()).Bool("tls_upstream", s.tls.upstreamTLS()).Msg("connection opened")
	go st.runUpstream()
	st.runClient()
}

// dialStream connects to the upstream at addr, with a TLS handshake when
// the upstream speaks TLS. A failure is counted and logged here, naming
// its cause.
func (s *Server) dialStream(ctx context.Context, log zerolog.Logger, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		s.m.dialFailures.Inc()
		log.Error().Err(err).Str("upstream", addr).Msg("upstream dial failed; client connection reset")
		return nil, err
	}
	s.sockets.setNet(c)
	tc, err := s.tls.dial(c, addr, time.Time{}, true)
	if err != nil {
		c.Close()
		s.m.dialFailures.Inc()
		log.Error().Err(err).Str("upstream", addr).Msg("client connection reset")
		return nil, err
	}
	return tc, nil
}

// readyStream checks the upstream as a pair would reach it, TLS
// handshake and SASL authentication included.
func (s *Server) readyStream(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(s.cfg.DialTimeout, 2*time.Second))
	defer cancel()
	c, err := s.dialOwn(ctx, !s.sasl.WorkedWithin(readyAuthFresh))
	if err != nil {
		return err
	}
	return c.Close()
}

// dialOwn opens a connection of kproxy's own to proxy.upstream, bounded
// by ctx's deadline: TCP, the TLS handshake when the upstream speaks TLS
// (not counted with the clients'), and with login an authentication
// (failing with errAuth). The deadline stays set on the connection.
func (s *Server) dialOwn(ctx context.Context, login bool) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.cfg.Upstream)
	if err != nil {
		return nil, err
	}
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	tc, err := s.tls.dial(c, s.cfg.Upstream, dl, false)
	if err != nil {
		c.Close()
		return nil, err
	}
	if s.sasl != nil && login {
		if _, err := s.sasl.Authenticate(ctx, sasl.StreamRoundTrip(tc, s.framing.MaxResponseBytes), hostOf(s.cfg.Upstream), nil); err != nil {
			tc.Close()
			return nil, errAuth{err}
		}
		// The exchange clears the deadline when it ends (for a relay);
		// what follows is bounded by it too.
		tc.SetDeadline(dl)
	}
	return tc, nil
}

// resetConn closes a client kproxy will not serve with a TCP reset (see
// refuse).
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// readyAuthFresh is how recent a working authentication spares a
// readiness check its own login: a probe every few seconds would
// otherwise log in at the broker each time.
const readyAuthFresh = 30 * time.Second

// errAuth is a readiness check that reached the upstream and failed to
// authenticate to it.
type errAuth struct{ error }

func (e errAuth) Unwrap() error { return e.error }
