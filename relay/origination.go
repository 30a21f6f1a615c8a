package relay

import (
	"context"
	"net"
	"time"
)

// Origination is kproxy authenticating to the broker itself
// (sasl.upstream): the package sasl builds it, the connection core runs
// Login on each new upstream connection before any client byte is
// relayed, and the session takes the Login it returned (Session.Arm).
// With it on, a client's own SaslHandshake and SaslAuthenticate are
// refused and the APIs in Hidden are left out of ApiVersions.
type Origination interface {
	// Login runs the initial authentication on up, a fresh connection
	// to the broker at addr with nothing relayed on it yet, bounded by
	// ctx. A failure has been counted; the caller logs it.
	Login(ctx context.Context, up net.Conn, addr string) (Login, error)
	// Admit says, before a new client's upstream is dialled, whether it
	// may be logged in at all (an error refuses it at once: logins keep
	// failing).
	Admit() error
	// Mechanism names the configured mechanism, for logs.
	Mechanism() string
	// Hidden are the API keys clients are not offered.
	Hidden() []int16
}

// Login is the outcome of one initial authentication: the principal the
// broker now sees (for logs and spans), when to re-authenticate (zero:
// never), and how.
type Login struct {
	Principal string
	ReauthAt  time.Time
	Reauth    Reauth
}

// Arm gives the session what its upstream connection's login decided:
// the principal for its spans, and its re-authentication.
func (s *Session) Arm(l Login) {
	s.upPrincipal = l.Principal
	s.peer.SetUpstreamPrincipal(l.Principal)
	s.SetReauth(l.ReauthAt, l.Reauth)
}
