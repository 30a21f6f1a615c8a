package core

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/relay"
)

// Port is what the core needs of the listener a client came in on: where
// its upstream is, and what to do when that cannot be reached.
type Port struct {
	// Upstream is the address a new client of this port is paired with;
	// it may wait (a node port whose broker is not known yet).
	Upstream func(ctx context.Context) (string, error)
	// DialFailed is told that the upstream could not be reached.
	DialFailed func()
	// Unknown counts and logs a client refused because Upstream failed.
	Unknown func(log *zerolog.Logger, err error)
}

// Opening is one accepted client as its driver hands it to Open: the
// transport steps of the opening sequence are the driver's, the sequence
// and its cleanup the core's.
type Opening struct {
	// Client is the accepted connection; Port the listener's.
	Client net.Conn
	Port   *Port
	// Handshake, when set, runs the client's TLS handshake once its slot
	// is taken, and returns the identity it proved.
	Handshake func() (relay.Identity, error)
	// First waits, bounded by read_timeout, for the first relay.FirstHead
	// bytes of the client's first frame and returns them, left unread
	// for the relay. Open calls it only when kproxy logs in at the broker
	// for every connection (SASL origination): a login costs the broker
	// and the identity provider, so it is made for a client that has
	// sent a request, not for a probe or a silent socket.
	First func() ([]byte, error)
	// Gone reports, without waiting, whether the client has closed its
	// end. Under SASL origination Open checks it while the client waits
	// for its login's turn and while the login runs: a client that left
	// costs no login, or no more of one.
	Gone func() bool
	// Dial connects to the upstream at addr (a TLS handshake included
	// where the upstream speaks it), bounded by ctx.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Reset closes a client kproxy will not serve with a TCP reset
	// (clients retry a reset like a refused connection); Drop closes one
	// whose handshake failed.
	Reset, Drop func()
	// Link makes the driver's connection for c over up: the session's
	// Link and the core's Transport.
	Link func(c *Conn, up net.Conn) (relay.Link, Transport)
	// Setup runs once c is registered, before its opened line: the
	// driver starts relaying. It cannot fail; a close it meets is a
	// close.
	Setup func(c *Conn)
	// Opened adds the driver's fields to the opened line.
	Opened func(*zerolog.Event) *zerolog.Event
}

// Open runs the opening sequence of one client, the same for both
// drivers: the client's handshake, a max_connections slot, under SASL
// origination the head of its first request, its upstream's address, the dial, the login of SASL origination, the logger's fields,
// the session with its principals and re-authentication, registration,
// and the driver's setup. A step that fails gives back what the steps
// before took, resets the client and returns nil.
func (k *Core) Open(o Opening) *Conn {
	client := o.Client.RemoteAddr().String()
	log := k.Log.With().Str("client", client).Logger()
	var id relay.Identity
	if o.Handshake != nil {
		// Before the slot: a handshake has its own bound
		// (tls.listener.max_handshakes), so idle or half-sent ones never
		// hold max_connections against clients that finish theirs.
		if k.draining.Load() {
			o.Reset()
			k.TurnAway(&log, "draining")
			return nil
		}
		var err error
		if id, err = o.Handshake(); err != nil {
			o.Drop()
			// Counted by result in the handshake metrics; a flood of
			// failed handshakes is logged once a second.
			k.refusals.line(&log, "tls_handshake", err, "connection closed")
			return nil
		}
	}
	if why := k.Reserve(); why != "" {
		o.Reset()
		k.TurnAway(&log, why)
		return nil
	}
	orig := k.Env.Origination
	if orig != nil {
		if why, err := k.first(o); err != nil {
			k.refuse(o)
			k.refusals.log(&log, why, err, k.M)
			return nil
		}
	}
	// Under origination a client's turn to log in comes before its dial:
	// a flood never opens broker connections faster than logins run.
	leave := func() {}
	present, left := context.Background(), func() {}
	if orig != nil {
		present, left = untilGone(o.Gone)
		ctx, cancel := context.WithTimeout(present, k.Limits.DialTimeout+k.Limits.ReadTimeout)
		l, err := orig.Enter(ctx)
		cancel()
		if err != nil {
			left()
			k.refuse(o)
			if present.Err() != nil {
				log.Debug().Msg("client left while waiting for its upstream login")
				return nil
			}
			k.Refuse(&log, orig.Refusal(err), err, "connection refused")
			return nil
		}
		leave = l
	}
	defer leave()
	defer left()
	addr, err := o.Port.Upstream(context.Background())
	if err != nil {
		k.refuse(o)
		o.Port.Unknown(&log, err)
		return nil
	}
	up, err := k.dial(o, addr)
	if err != nil {
		k.refuse(o)
		k.M.DialFailures.Inc()
		log.Error().Err(err).Str("upstream", addr).Msg("upstream dial failed; client connection reset")
		o.Port.DialFailed()
		return nil
	}
	var login relay.Login
	if orig != nil {
		if login, err = k.login(present, orig, up, addr); err != nil {
			up.Close()
			k.refuse(o)
			if present.Err() != nil {
				log.Debug().Str("upstream", addr).Msg("client left during its upstream login")
				return nil
			}
			log.Error().Err(err).Str("upstream", addr).Str("mechanism", orig.Mechanism()).
				Msg("upstream authentication failed; client connection reset")
			return nil
		}
	}
	left() // before the relay reads the client
	lc := log.With().Str("upstream", up.LocalAddr().String()+">"+addr)
	if n := id.Name(); n != "" {
		lc = lc.Str("principal", n)
	}
	if orig != nil {
		lc = lc.Str("upstream_principal", login.Principal)
	}
	c := &Conn{core: k, Log: lc.Logger(), Opened: time.Now(), done: make(chan struct{})}
	link, t := o.Link(c, up)
	c.t = t
	c.Sess = relay.Start(k.Env, link, c.Log, client, addr)
	c.Sess.SetIdentity(id)
	if orig != nil {
		c.Sess.Arm(login)
	}
	if why := k.register(c); why != "" {
		o.Reset()
		up.Close()
		k.Unreserve()
		k.TurnAway(&log, why)
		return nil
	}
	o.Setup(c)
	c.armReauth()
	ev := c.Log.Info()
	if o.Opened != nil {
		ev = o.Opened(ev)
	}
	ev.Msg("connection opened")
	return c
}

// refuse gives back the slot of a client not opened and resets it.
func (k *Core) refuse(o Opening) {
	k.Unreserve()
	o.Reset()
}

// dial runs the driver's dial bounded by dial_timeout.
func (k *Core) dial(o Opening, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), k.Limits.DialTimeout)
	defer cancel()
	return o.Dial(ctx, addr)
}

// login runs the initial authentication of a new upstream connection,
// bounded by dial_timeout + read_timeout and by present (the client's
// staying).
func (k *Core) login(present context.Context, orig relay.Origination, up net.Conn, addr string) (relay.Login, error) {
	ctx, cancel := context.WithTimeout(context.Background(), k.Limits.DialTimeout+k.Limits.ReadTimeout)
	defer cancel()
	lc := &loginConn{Conn: up}
	// A client gone mid-login ends it: the login's context is
	// cancelled, so the login counts as cancelled, then the upstream
	// connection, dropped anyway, is closed (a netpoll read under way
	// sees no deadline moved, and must not have one moved under it).
	defer context.AfterFunc(present, func() {
		lc.closed.Store(true)
		cancel()
		up.Close()
	})()
	return orig.Login(ctx, lc, addr)
}

// loginConn is an upstream connection during its login: once closed for
// a client that left, deadlines are no longer set on it.
type loginConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *loginConn) SetDeadline(t time.Time) error {
	if c.closed.Load() {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

// first waits for the head of the client's first frame and checks it is
// a Kafka request; it says why not, as counted.
func (k *Core) first(o Opening) (string, error) {
	head, err := o.First()
	if err != nil {
		return "no_request", err
	}
	if err := relay.FirstRequest(head, k.Env.Framing.MaxRequestBytes); err != nil {
		return "not_kafka", err
	}
	return "", nil
}

// goneCheck is how often untilGone looks at the client.
const goneCheck = 50 * time.Millisecond

// untilGone is a context cancelled once gone reports the client has left
// (looked at every goneCheck), and what stops the watch and waits for it
// to end.
func untilGone(gone func() bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	if gone == nil {
		return ctx, cancel
	}
	stop, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(goneCheck)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if gone() {
					cancel()
					return
				}
			}
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() { close(stop) })
		<-exited // gone may read the client: done before the relay does
	}
}
