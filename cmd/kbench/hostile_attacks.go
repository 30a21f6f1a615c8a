package main

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// attackTally is what one attack did: requests written whole, answers
// read, and connections the proxy closed on it.
type attackTally struct {
	sent, answered, closed atomic.Int64
	settled                atomic.Int64 // hogs: first sends over (held or refused)
}

// attacker runs one hostile client loop on a fresh connection each time
// the proxy closes the last one, until stop is closed.
type attacker func(addr string, stop <-chan struct{}, t *attackTally)

// repeatFrame writes frame, reads its answer, and again, on one
// connection at a time, at most one frame per interval (0: as fast as
// answers come): the bomb and the oversize storm. A closed connection is
// replaced, within the same pace.
func repeatFrame(frame []byte, interval time.Duration) attacker {
	return func(addr string, stop <-chan struct{}, t *attackTally) {
		var buf []byte
		next := time.Now()
		pace := func() bool { // false once stopped
			if interval <= 0 {
				return !stopped(stop)
			}
			next = next.Add(interval)
			select {
			case <-stop:
				return false
			case <-time.After(time.Until(next)):
				return true
			}
		}
		for !stopped(stop) {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			r := bufio.NewReaderSize(c, 64<<10)
			for !stopped(stop) {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write(frame); err != nil {
					break
				}
				t.sent.Add(1)
				if _, err := readFrame(r, &buf); err != nil {
					break
				}
				t.answered.Add(1)
				if !pace() {
					break
				}
			}
			c.Close()
			if !stopped(stop) {
				t.closed.Add(1)
				pace()
			}
		}
	}
}

// hog sends the start of a frame of `size` bytes and then `hold` bytes of
// its body, never the rest, and keeps the connection open: the proxy must
// buffer what it got while it waits. A hog the proxy closes connects again
// after pause: the attack is on memory; resending without a pause is a
// bandwidth flood, which costs every client CPU whatever the proxy does
// (kbench flood measures that).
func hog(size, hold int, pause time.Duration) attacker {
	prefix := hogPrefix(size)
	filler := make([]byte, 256<<10)
	return func(addr string, stop <-chan struct{}, t *attackTally) {
		for !stopped(stop) {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			_, err = c.Write(prefix)
			for left := hold; err == nil && left > 0 && !stopped(stop); left -= len(filler) {
				_, err = c.Write(filler[:min(left, len(filler))])
			}
			t.settled.Add(1) // sent what it holds, or closed trying
			if err == nil {
				t.sent.Add(1)
				// Hold until the proxy closes it or the phase ends.
				closed := make(chan struct{})
				go func() {
					var b [1]byte
					c.SetReadDeadline(time.Time{})
					c.Read(b[:])
					close(closed)
				}()
				select {
				case <-stop:
					c.Close()
					<-closed
					return
				case <-closed:
				}
			}
			c.Close()
			if !stopped(stop) {
				t.closed.Add(1)
				select {
				case <-stop:
				case <-time.After(pause):
				}
			}
		}
	}
}

// runAttackers starts n copies of a until stop is closed.
func runAttackers(addr string, n int, a attacker, stop <-chan struct{}, t *attackTally, wg *sync.WaitGroup) {
	for range n {
		wg.Go(func() { a(addr, stop, t) })
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
