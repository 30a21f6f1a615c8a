package proxy

import (
	"context"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/relay"
	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/tracing"
)

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
	s.env.Originating = true
	s.env.Hidden = sasl.HiddenAPIs()
}

// authTimeout bounds the initial authentication of a new upstream
// connection.
func (s *Server) authTimeout() time.Duration { return s.cfg.DialTimeout + s.framing.ReadTimeout }

// authenticate runs the initial authentication on conn, a new upstream
// connection to addr on which nothing is relayed yet; a failure is
// counted by the originator and logged here, without the secret.
func (s *Server) authenticate(conn net.Conn, addr string, log *zerolog.Logger) (sasl.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.authTimeout())
	defer cancel()
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	res, err := s.sasl.Authenticate(ctx, sasl.StreamRoundTrip(conn, s.framing.MaxResponseBytes), hostOf(addr), nil)
	conn.SetDeadline(time.Time{})
	if err != nil {
		log.Error().Err(err).Str("upstream", addr).Str("mechanism", s.sasl.Mechanism()).
			Msg("upstream authentication failed; client connection reset")
	}
	return res, err
}

// armSasl gives a new session its principal and its re-authentication,
// after the initial authentication res on the connection to addr.
func (s *Server) armSasl(sess *relay.Session, peer *tracing.Peer, addr string, res sasl.Result) {
	peer.SetUpstreamPrincipal(res.Principal)
	host := hostOf(addr)
	sess.SetReauth(sasl.ReauthAt(time.Now(), res.Lifetime), func(ctx context.Context, rt relay.RoundTrip) (time.Time, error) {
		next, err := s.sasl.Authenticate(ctx, sasl.RoundTrip(rt), host, &res)
		if err != nil {
			return time.Time{}, err
		}
		res = next
		return sasl.ReauthAt(time.Now(), next.Lifetime), nil
	})
}

// hostOf is addr's host, what a mechanism may bind to (SCRAM does not;
// some do).
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
