package proxy

import (
	"errors"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/correlate"
)

// pair is one client connection and the upstream connection kproxy opened
// for it. Each side's reader is consumed only by that side's OnRequest
// handler; the upstream writer is owned by the client handler, and the
// client writer by whoever holds wmu.
type pair struct {
	s        *Server
	log      zerolog.Logger
	client   netpoll.Connection
	upstream netpoll.Connection
	table    *correlate.Table
	wmu      sync.Mutex // serializes writes to the client
	opened   time.Time

	draining atomic.Bool
	closed   atomic.Bool
	done     chan struct{}

	requests, responses atomic.Int64
	bytesIn, bytesOut   atomic.Int64
}

// Close reasons, as logged.
const (
	reasonClientClosed   = "client closed"
	reasonUpstreamClosed = "upstream closed"
	reasonDrained        = "drained"
	reasonDrainTimeout   = "drain timeout"
)

// pairUp turns an accepted socket into a netpoll connection, dials its
// upstream and starts relaying. It runs on its own goroutine so a slow
// upstream dial never holds up accepting.
func (s *Server) pairUp(c net.Conn) {
	peer := c.RemoteAddr().String()
	log := s.log.With().Str("client", peer).Logger()
	client, err := toNetpoll(c)
	if err != nil {
		log.Error().Err(err).Msg("cannot hand connection to the poller")
		s.m.refused.WithLabelValues("poller").Inc()
		return
	}
	up, err := netpoll.DialConnection("tcp", s.cfg.Upstream, s.cfg.DialTimeout)
	if err != nil {
		client.Close()
		s.m.dialFailures.Inc()
		log.Error().Err(err).Str("upstream", s.cfg.Upstream).Msg("upstream dial failed; client connection closed")
		return
	}
	p := &pair{s: s, client: client, upstream: up, table: correlate.New(s.table.MaxInFlight),
		opened: time.Now(), done: make(chan struct{})}
	p.log = log.With().Str("upstream", up.LocalAddr().String()+">"+s.cfg.Upstream).Logger()
	if why := s.add(p); why != "" {
		client.Close()
		up.Close()
		s.m.refused.WithLabelValues(why).Inc()
		log.Warn().Str("reason", why).Msg("connection refused")
		return
	}
	for _, conn := range []netpoll.Connection{client, up} {
		conn.SetReadTimeout(s.framing.ReadTimeout)
		conn.SetWriteTimeout(s.cfg.WriteTimeout)
	}
	client.AddCloseCallback(func(netpoll.Connection) error { p.close(reasonClientClosed, nil); return nil })
	up.AddCloseCallback(func(netpoll.Connection) error { p.close(reasonUpstreamClosed, nil); return nil })
	p.log.Info().Msg("connection opened")
	// The return direction first, so no response can arrive unhandled.
	up.SetOnRequest(p.onUpstream)
	client.SetOnRequest(p.onClient)
}

// toNetpoll moves an accepted socket from Go's poller to netpoll's by
// duplicating its descriptor and closing the original.
func toNetpoll(c net.Conn) (netpoll.Connection, error) {
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, dupErr := -1, error(nil)
	if err := rc.Control(func(orig uintptr) { fd, dupErr = syscall.Dup(int(orig)) }); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, dupErr
	}
	syscall.CloseOnExec(fd)
	conn, err := netpoll.NewFDConnection(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return conn, nil
}

// drain asks the pair to finish what is in flight, take nothing new, and
// close.
func (p *pair) drain() {
	p.draining.Store(true)
	if p.table.Len() == 0 {
		p.close(reasonDrained, nil)
	}
}

// close shuts both sides once, fails what is still in flight and logs one
// line for the connection.
func (p *pair) close(reason string, err error) {
	if !p.closed.CompareAndSwap(false, true) {
		return
	}
	p.client.Close()
	p.upstream.Close()
	left := p.table.Close()
	p.s.m.inFlight.Sub(float64(len(left)))
	p.s.m.failed.Add(float64(len(left)))
	p.s.m.open.Dec()
	p.s.remove(p)
	close(p.done)
	ev := p.log.Info()
	if err != nil {
		ev = p.log.Warn().Err(err)
	}
	ev.Str("reason", reason).
		Dur("duration", time.Since(p.opened)).
		Int64("requests", p.requests.Load()).
		Int64("responses", p.responses.Load()).
		Int64("bytes_in", p.bytesIn.Load()).
		Int64("bytes_out", p.bytesOut.Load()).
		Int("failed_in_flight", len(left)).
		Msg("connection closed")
}

// recoverPanic closes the pair whose handler panicked; other pairs go on.
func (p *pair) recoverPanic(side string) {
	if r := recover(); r != nil {
		p.log.Error().Str("side", side).Interface("panic", r).Bytes("stack", debug.Stack()).Msg("relay panicked")
		p.close("panic", errors.New("relay panicked"))
	}
}
