package loop

import (
	"bytes"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// A raw send the socket cannot take whole leaves the rest in netpoll's
// writer, and flushing that delivers every byte once, in order.
func TestRawSendHandsTheRestToTheWriter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	conn := dialRetrying(t, ln.Addr().String())
	defer conn.Close()
	peer := <-accepted
	defer peer.Close()
	r := newRawConn(conn, guardWrites(conn))
	if r == nil {
		t.Fatal("no fd")
	}
	if err := syscall.SetsockoptInt(r.fd, syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4<<10); err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := 0; i < 2000; i++ { // 2000 slices: more than one sendmsg takes
		b := bytes.Repeat([]byte{byte(i)}, 1+i%700)
		want = append(want, b...)
		r.iov = append(r.iov, b)
	}
	all, err := r.send()
	if err != nil {
		t.Fatal(err)
	}
	if all {
		t.Fatalf("the socket took all %d bytes; the test needs a partial send", len(want))
	}
	if len(r.iov) != 0 {
		t.Fatal("the batch was not emptied")
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(want))))
		got <- b
	}()
	if err := conn.Writer().Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, want) {
			t.Fatalf("peer got %d bytes, not the %d sent in order", len(b), len(want))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the rest never arrived")
	}
}

// A send after the connection closed fails instead of writing to an fd
// that may have been reused.
func TestRawSendAfterCloseFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn := dialRetrying(t, ln.Addr().String())
	r := newRawConn(conn, guardWrites(conn))
	conn.Close()
	r.iov = append(r.iov, []byte("late"))
	if _, err := r.send(); err != errGone {
		t.Fatalf("send after close: %v, want errGone", err)
	}
}
