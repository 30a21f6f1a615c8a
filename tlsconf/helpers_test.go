package tlsconf

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kproxy/kproxy/internal/syncbuf"
)

// accepted is one handshake the test server saw.
type accepted struct {
	err   error
	state tls.ConnectionState
}

// greeting is what the test server writes first after a handshake it
// accepted. A client reads it before writing anything: under TLS 1.3 a
// client learns that the server refused its certificate only on a read,
// and if it had written first, the server would close with that input
// unread, and the reset could race the alert naming the cause.
var greeting = []byte("!")

// serve runs a TLS server on 127.0.0.1 with cfg: every connection is
// handshaken within timeout, its outcome sent on the channel, and a
// successful one echoes what it reads.
func serve(t *testing.T, cfg *tls.Config, timeout time.Duration) (string, <-chan accepted) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan accepted, 16)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				tc := tls.Server(c, cfg)
				c.SetDeadline(time.Now().Add(timeout))
				err := tc.Handshake()
				out <- accepted{err, tc.ConnectionState()}
				if err != nil {
					return
				}
				c.SetDeadline(time.Time{})
				if _, err := tc.Write(greeting); err != nil {
					return
				}
				io.Copy(tc, tc)
			}()
		}
	}()
	return ln.Addr().String(), out
}

// next waits for the server's next handshake.
func next(t *testing.T, ch <-chan accepted) accepted {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("no handshake reached the server")
	}
	return accepted{}
}

// dial handshakes a client with cfg to addr.
func dial(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err == nil {
		err = greeted(c)
		if err == nil {
			err = echo(c, "hello")
		}
		if err != nil {
			c.Close()
		} else {
			t.Cleanup(func() { c.Close() })
		}
	}
	return c, err
}

// greeted reads the server's greeting: the first read, where TLS 1.3
// reports a refused client certificate.
func greeted(c net.Conn) error {
	b := make([]byte, len(greeting))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	if !bytes.Equal(b, greeting) {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// echo writes msg and reads it back.
func echo(c net.Conn, msg string) error {
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, []byte(msg)) {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// logBuf is a zerolog logger writing into a buffer the test reads.
type logBuf struct{ syncbuf.Buffer }

// lines are the lines logged at level warn or above (the start-up and
// reload info lines left out).
func (l *logBuf) lines() []string { return l.split(false) }

// infos are the info lines logged.
func (l *logBuf) infos() []string { return l.split(true) }

// split returns the logged lines that are (info) or are not info lines.
func (l *logBuf) split(info bool) []string {
	var out []string
	for _, s := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if len(s) > 0 && strings.Contains(s, `"level":"info"`) == info {
			out = append(out, s)
		}
	}
	return out
}

func newLog() (*logBuf, zerolog.Logger) {
	b := &logBuf{}
	return b, zerolog.New(b)
}

func newMetrics() (*Metrics, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return NewMetrics(reg), reg
}

// newStore starts a Store with a reload interval long enough that only
// the test's own Reload calls reload, and closes it at the end.
func newStore(t *testing.T, c Config, m *Metrics, log zerolog.Logger) *Store {
	t.Helper()
	if c.ReloadInterval == 0 {
		c.ReloadInterval = time.Hour
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("invalid test config: %v", err)
	}
	s, err := New(c, m, log)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}
