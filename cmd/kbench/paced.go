package main

import (
	"bufio"
	"net"
	"time"

	"github.com/kproxy/kproxy/framing"
)

// drivePaced sends requests on c at a fixed rate (one every interval,
// the first at offset), at most depth in flight: a paced closed loop.
// Each request has an intended send time on that schedule, and its
// latency is counted from it, not from when it was written: when the
// target falls behind and the depth is used up, the requests waiting for
// a slot wait on the clock, so queueing shows in the latency instead of
// being hidden by the sender slowing down (coordinated omission).
//
// A sender goroutine writes on schedule; this one reads the responses,
// in request order, checking correlation ids as driveConn does.
func drivePaced(c net.Conn, frame []byte, depth int, interval, offset time.Duration, deadline time.Time, budget int64, checkFirst func([]byte) error) (res connResult) {
	res.hist = newHistogram()
	setNoDelay(c)
	c.SetDeadline(deadline.Add(10 * time.Second)) // bound a peer that stops answering
	r := bufio.NewReaderSize(c, 64<<10)
	base := time.Now()
	stop := deadline.Sub(base)
	sentAt := make([]time.Duration, depth) // intended send times, by correlation id modulo depth
	free := make(chan struct{}, depth)     // a token per request slot not in flight
	for range depth {
		free <- struct{}{}
	}
	written := make(chan struct{}, depth) // a token per request written and not yet answered
	sendErr := make(chan error, 1)
	quit := make(chan struct{}) // the reader gave up: the sender stops
	defer close(quit)
	go func() {
		defer close(written)
		w := bufio.NewWriterSize(c, 64<<10)
		var next uint32
		for k := int64(0); k < budget; k++ {
			due := offset + time.Duration(k)*interval
			if due >= stop {
				break
			}
			if wait := due - time.Since(base); wait > 0 {
				if err := w.Flush(); err != nil {
					sendErr <- err
					return
				}
				time.Sleep(wait)
			}
			select {
			case <-free:
			default: // every slot is in flight: write what is buffered, then wait
				if err := w.Flush(); err != nil {
					sendErr <- err
					return
				}
				select {
				case <-free:
				case <-quit:
					return
				}
			}
			framing.SetRequestCorrelationID(frame, int32(next))
			sentAt[next%uint32(depth)] = due
			next++
			if _, err := w.Write(frame); err != nil {
				sendErr <- err
				return
			}
			written <- struct{}{}
		}
		if err := w.Flush(); err != nil {
			sendErr <- err
		}
	}()
	var expect uint32
	var first []byte
	for range written {
		hdr, err := r.Peek(8)
		if err != nil {
			res.err = err
			return res
		}
		size, err := checkResponseHeader(hdr, expect)
		if err != nil {
			res.err = err
			return res
		}
		res.hist.record(time.Since(base) - sentAt[expect%uint32(depth)])
		if res.err = takeResponse(r, &first, expect, size, checkFirst); res.err != nil {
			return res
		}
		expect++
		res.n++
		res.respBytes += int64(framing.SizeLen + size)
		free <- struct{}{}
	}
	select {
	case res.err = <-sendErr:
	default:
	}
	return res
}
