package main

import (
	"os"
	"testing"
	"time"

	"github.com/kproxy/kproxy/framing"
)

// Idle holds connections that each answered through kproxy, and reads the
// memory of the process asked for (this one: kproxy runs in-process).
func TestIdleThroughKproxy(t *testing.T) {
	b := testBroker(t)
	res, err := runIdle(idleConfig{Addr: testKproxy(t, b.Addr()), PID: os.Getpid(), Conns: 200, Hold: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Opened != 200 {
		t.Fatalf("opened %d of 200 connections", res.Opened)
	}
}

// Against an upstream that never reads, kproxy (max_unread_bytes 128 MiB
// by default) closes a flooding client once it is that far ahead; flood
// reports the close, and the peak it sampled shows the input kproxy held
// (kproxy runs in this process).
func TestFloodClosedByKproxy(t *testing.T) {
	up, err := startStalled("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.close()
	res, err := runFlood(floodConfig{Addr: testKproxy(t, up.ln.Addr().String()), PID: os.Getpid(),
		Size: 64 << 10, Acks0: true, Duration: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.ClosedAfter == 0 || res.Sent < 128<<20 || res.Peak < res.Before+32<<20 {
		t.Fatalf("closed after %v, sent %d bytes, RSS %d before, %d peak", res.ClosedAfter, res.Sent, res.Before, res.Peak)
	}
}

func TestSetAcks0(t *testing.T) {
	frame := produceFrame("kbench", 200, "kbench-flood")
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	if acks, err := framing.ProduceAcks(frame[h.BodyOffset:], h.APIVersion); err != nil || acks != 1 {
		t.Fatalf("before: acks %d, %v", acks, err)
	}
	setAcks0(frame)
	if acks, err := framing.ProduceAcks(frame[h.BodyOffset:], h.APIVersion); err != nil || acks != 0 {
		t.Fatalf("after: acks %d, %v", acks, err)
	}
}
