package proxy

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// wireTap sits between kproxy and kfake and records, in the order they
// cross it, the requests kproxy sends and the responses kfake sends on
// each upstream connection. kfake reads a connection's next request only
// once the previous response is written, so what kfake receives cannot
// show a request kproxy sent while another was in flight; the tap sees
// it. A response is recorded before it is passed on, a request as soon as
// it is read, so a request kproxy sent in reaction to a response is always
// recorded after it.
type wireTap struct {
	t      testing.TB
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  [][]tapEvent
}

// tapEvent is a request (key and correlation id) or a response (its
// correlation id) that crossed the tap.
type tapEvent struct {
	request bool
	key     int16
	corr    int32
}

func (e tapEvent) String() string {
	if e.request {
		return fmt.Sprintf("req(%d)#%d", e.key, e.corr)
	}
	return fmt.Sprintf("resp#%d", e.corr)
}

// startTap listens for kproxy and relays each connection to target.
func startTap(t testing.TB, target string) *wireTap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireTap{t: t, ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go w.accept()
	return w
}

func (w *wireTap) addr() string { return w.ln.Addr().String() }

func (w *wireTap) accept() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", w.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		w.mu.Lock()
		i := len(w.conns)
		w.conns = append(w.conns, nil)
		w.mu.Unlock()
		go w.pipe(i, c, up, true)
		go w.pipe(i, up, c, false)
	}
}

// pipe copies whole frames from src to dst, recording each.
func (w *wireTap) pipe(i int, src, dst net.Conn, requests bool) {
	defer src.Close()
	defer dst.Close()
	for {
		f, err := readFrame(src)
		if err != nil {
			return
		}
		e := tapEvent{request: requests}
		if requests && len(f) >= 12 {
			e.key, e.corr = int16(binary.BigEndian.Uint16(f[4:])), int32(binary.BigEndian.Uint32(f[8:]))
		} else if len(f) >= 8 {
			e.corr = corrOf(f)
		}
		w.mu.Lock()
		w.conns[i] = append(w.conns[i], e)
		w.mu.Unlock()
		if _, err := dst.Write(f); err != nil {
			return
		}
	}
}

// events is what crossed the tap on its i-th connection so far.
func (w *wireTap) events(i int) []tapEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i >= len(w.conns) {
		return nil
	}
	return append([]tapEvent(nil), w.conns[i]...)
}

// count is how many connections kproxy opened through the tap.
func (w *wireTap) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.conns)
}

func eventsString(es []tapEvent) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.String()
	}
	return strings.Join(s, " ")
}
