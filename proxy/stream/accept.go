package stream

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/relay"
)

// Driver relays the connections of one core over Go's net, with TLS on
// the sides that speak it.
type Driver struct {
	k   *core.Core
	tls *TLS
}

// New returns the stream driver of k, speaking tls, with at most
// maxHandshakes client handshakes in progress (0: DefaultMaxHandshakes).
func New(k *core.Core, tls *TLS, maxHandshakes int) *Driver {
	if tls != nil {
		tls.hs = newHandshakes(maxHandshakes, &k.Budget)
	}
	return &Driver{k: k, tls: tls}
}

// Listener is one port of the stream driver.
type Listener struct {
	d    *Driver
	port *core.Port
	ln   net.Listener
}

// Listen binds addr; its clients are paired with port's upstream.
func (d *Driver) Listen(addr string, port *core.Port) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Listener{d: d, port: port, ln: ln}, nil
}

// Addr is the bound address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Stop closes the port.
func (l *Listener) Stop(context.Context) { l.ln.Close() }

// Close unbinds a listener that never served.
func (l *Listener) Close() { l.ln.Close() }

// Serve accepts clients until the listener is closed, each relayed by a
// stream of its own.
func (l *Listener) Serve() error {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.d.k.Done():
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
			l.d.k.Log.Error().Err(err).Msg("accept failed")
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go l.open(c)
	}
}

// open opens a client accepted by Serve through the core's opening
// sequence: the TLS handshake with it (bounded by the handshake timeout),
// the upstream dial with its own handshake, then a stream relays until
// either side closes.
func (l *Listener) open(raw net.Conn) {
	d := l.d
	client := raw
	var st *stream
	var cr *streamReader // made early when the first request is awaited
	c := d.k.Open(core.Opening{
		Client: raw,
		Port:   l.port,
		Handshake: func() (relay.Identity, error) {
			d.k.Sockets.SetNet(raw)
			tc, id, err := d.tls.accept(raw)
			client = tc
			return id, err
		},
		First: func() ([]byte, error) {
			cr = newStreamReader(client, d.k.Limits.ReadTimeout, func(delta int) bool {
				return st != nil && st.charge(core.FromClient, delta) // no growth before the stream exists
			})
			return cr.Peek(relay.FirstHead)
		},
		Gone: func() bool {
			err := cr.peekClose() // what it reads is kept for the relay
			return err != nil && !isTimeout(err)
		},
		Reset: func() { resetConn(raw) },
		Drop:  func() { raw.Close() },
		Dial:  d.dial,
		Link: func(c *core.Conn, up net.Conn) (relay.Link, core.Transport) {
			st = newStream(d, c, client, up, cr)
			return st, st
		},
		Setup: func(c *core.Conn) { st.sess = c.Sess },
		Opened: func(ev *zerolog.Event) *zerolog.Event {
			return ev.Bool("tls_client", d.tls.ClientTLS()).Bool("tls_upstream", d.tls.UpstreamTLS())
		},
	})
	if c == nil {
		return
	}
	go st.runUpstream()
	st.runClient()
}

// dial connects to the upstream at addr, with a TLS handshake when the
// upstream speaks it.
func (d *Driver) dial(ctx context.Context, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	d.k.Sockets.SetNet(c)
	tc, err := d.tls.Dial(c, addr, time.Time{}, true)
	if err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// resetConn closes a client kproxy will not serve with a TCP reset:
// clients retry a reset like a refused connection.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
