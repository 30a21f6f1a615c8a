package proxy

import (
	"context"
	"net"
	"time"

	"github.com/kproxy/kproxy/sasl"
)

// readyStream checks the upstream as a connection would reach it, TLS
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
	tc, err := s.tls.Dial(c, s.cfg.Upstream, dl, false)
	if err != nil {
		c.Close()
		return nil, err
	}
	if s.sasl != nil && login && s.sasl.InBackoff() {
		// Logins keep failing: the check reports the last failure rather
		// than adding a failed login of its own.
		tc.Close()
		failing := s.sasl.Ready()
		if failing == nil {
			failing = sasl.ErrBackoff
		}
		return nil, errAuth{failing}
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

// hostOf is addr's host, what a mechanism may bind to.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// readyAuthFresh is how recent a working authentication spares a
// readiness check its own login: a probe every few seconds would
// otherwise log in at the broker each time.
const readyAuthFresh = 30 * time.Second

// errAuth is a readiness check that reached the upstream and failed to
// authenticate to it.
type errAuth struct{ error }

func (e errAuth) Unwrap() error { return e.error }
