package sasl

import (
	"context"
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

// Admit refuses a new client at once while logins keep failing
// (ErrBackoff), before its upstream is dialled.
func (g origination) Admit() error { return g.o.gate.admit() }

// Login authenticates up, bounded by ctx's deadline (also set on up for
// the exchange, and cleared after it), once the gate lets it (the login
// rate and concurrency of the process), and arms the re-authentication
// that KIP-368 asks for before the broker's session ends.
func (g origination) Login(ctx context.Context, up net.Conn, addr string) (relay.Login, error) {
	if err := g.o.gate.admit(); err != nil {
		return relay.Login{}, err
	}
	leave, err := g.o.gate.enter(ctx)
	if err != nil {
		return relay.Login{}, err
	}
	defer leave()
	dl, _ := ctx.Deadline()
	up.SetDeadline(dl)
	host := hostOf(addr)
	res, err := g.o.Authenticate(ctx, StreamRoundTrip(up, g.maxResponse), host, nil)
	up.SetDeadline(time.Time{})
	g.o.gate.done(err)
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
