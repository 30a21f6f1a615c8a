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
	// Enter waits, bounded by ctx, for a new client's turn to log in,
	// before its upstream is dialled (the process's login rate and
	// concurrency), and refuses it at once while logins keep failing;
	// leave, called once the login is over, gives the turn back. The
	// error says which (see Refusal).
	Enter(ctx context.Context) (leave func(), err error)
	// Refusal names an Enter error as counted: "login_backoff" or
	// "login_limit".
	Refusal(err error) string
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
