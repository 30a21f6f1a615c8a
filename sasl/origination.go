package sasl

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/kproxy/kproxy/relay"
)

// Origination is o as the relay runs it (relay.Origination): the login
// of each new upstream connection, reading responses of up to
// maxResponse bytes, and that connection's re-authentication. Nil when o
// is off.
func (o *Originator) Origination(maxResponse int) relay.Origination {
	if !o.On() {
		return nil
	}
	return origination{o, maxResponse}
}

type origination struct {
	o           *Originator
	maxResponse int
}

func (g origination) Mechanism() string { return g.o.Mechanism() }
func (g origination) Hidden() []int16   { return HiddenAPIs() }

// Enter waits for a new client's turn to log in and refuses it at once
// while logins keep failing (ErrBackoff), before its upstream is
// dialled: a flood of clients never opens broker connections faster
// than logins may run.
func (g origination) Enter(ctx context.Context) (func(), error) {
	if err := g.o.gate.admit(); err != nil {
		return nil, err
	}
	return g.o.gate.enter(ctx)
}

// Refusal names an Enter error as counted.
func (g origination) Refusal(err error) string {
	if errors.Is(err, ErrBackoff) {
		return "login_backoff"
	}
	return "login_limit"
}

// Login authenticates up, bounded by ctx's deadline (also set on up for
// the exchange, and cleared after it), in a turn Enter gave, counts the
// result for the backoff, and arms the re-authentication that KIP-368
// asks for before the broker's session ends.
func (g origination) Login(ctx context.Context, up net.Conn, addr string) (relay.Login, error) {
	dl, _ := ctx.Deadline()
	up.SetDeadline(dl)
	host := hostOf(addr)
	res, err := g.o.Authenticate(ctx, StreamRoundTrip(up, g.maxResponse), host, nil)
	up.SetDeadline(time.Time{})
	if err != nil {
		return relay.Login{Principal: res.Principal}, err
	}
	return relay.Login{
		Principal: res.Principal,
		ReauthAt:  ReauthAt(time.Now(), res.Lifetime),
		Reauth: func(ctx context.Context, rt relay.RoundTrip) (time.Time, error) {
			next, err := g.o.Authenticate(ctx, RoundTrip(rt), host, &res)
			if err != nil {
				return time.Time{}, err
			}
			res = next
			return ReauthAt(time.Now(), next.Lifetime), nil
		},
	}, nil
}

// hostOf is addr's host, what a mechanism may bind to (SCRAM does not;
// some do).
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
