package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"sync"
	"time"
)

// floodConfig is one flood run: a single client writes Produce frames to
// Addr as fast as it can and never reads, while PID's resident memory is
// sampled. In front of a stalled upstream (kbench stall) this shows whether
// a proxy bounds what one connection can make it buffer.
type floodConfig struct {
	Addr     string
	PID      int
	Size     int
	Acks0    bool
	Duration time.Duration
}

type floodResult struct {
	Sent         int64
	Before, Peak int64
	ClosedAfter  time.Duration // 0: still open at the end
}

func runFlood(cfg floodConfig) (floodResult, error) {
	var res floodResult
	rss, err := watchRSS(cfg.PID)
	if err != nil {
		return res, err
	}
	c, err := net.DialTimeout("tcp", cfg.Addr, 5*time.Second)
	if err != nil {
		rss.stop()
		return res, err
	}
	defer c.Close()
	frame := produceFrame("kbench", cfg.Size, "kbench-flood")
	if cfg.Acks0 {
		setAcks0(frame)
	}
	batch := frame
	for len(batch) < 256<<10 { // write in large chunks, like a busy producer
		batch = append(batch, frame...)
	}

	start := time.Now()
	deadline := start.Add(cfg.Duration)
	c.SetWriteDeadline(deadline)
	for time.Now().Before(deadline) {
		n, err := c.Write(batch)
		res.Sent += int64(n)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				res.ClosedAfter = time.Since(start)
			}
			break
		}
	}
	time.Sleep(200 * time.Millisecond) // one more sample after the close
	err = rss.stop()
	res.Before, res.Peak = rss.Before, rss.Peak
	return res, err
}

// setAcks0 turns a Produce v9 frame from produceFrame into an acks=0 one:
// acks sits right after the header and the (null) transactional id.
func setAcks0(frame []byte) {
	// size 4, key 2, version 2, corr 4, client id 2+n, header tags 1,
	// transactional id (compact nullable string) 1.
	n := int(frame[12])<<8 | int(frame[13])
	at := 4 + 2 + 2 + 4 + 2 + n + 1 + 1
	frame[at], frame[at+1] = 0, 0
}

func floodCmd(args []string) error {
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	var cfg floodConfig
	fs.StringVar(&cfg.Addr, "addr", "", "kproxy address, HOST:PORT, in front of a stalled upstream (kbench stall)")
	fs.IntVar(&cfg.PID, "pid", 0, "process id whose resident memory is sampled")
	fs.IntVar(&cfg.Size, "s", 16<<10, "bytes per Produce request frame")
	fs.BoolVar(&cfg.Acks0, "acks0", false, "send acks=0 Produce (no response expected, so no in-flight limit applies)")
	fs.DurationVar(&cfg.Duration, "t", 10*time.Second, "longest the flood runs")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := needAddrPID(fs, cfg.Addr, cfg.PID); err != nil {
		return err
	}
	res, err := runFlood(cfg)
	acks := "acks=1"
	if cfg.Acks0 {
		acks = "acks=0"
	}
	fmt.Printf("kbench flood: %s, %d-byte %s Produce frames, never reading\n", cfg.Addr, cfg.Size, acks)
	closed := "still open after " + cfg.Duration.String()
	if res.ClosedAfter > 0 {
		closed = "closed by the proxy after " + res.ClosedAfter.Round(time.Millisecond).String()
	}
	fmt.Printf("  sent %s; %s\n  pid %d RSS: %s before, %s peak (+%s)\n", mib(res.Sent), closed,
		cfg.PID, mib(res.Before), mib(res.Peak), mib(res.Peak-res.Before))
	return err
}

// stalled is an upstream that accepts connections and never reads from
// them, for flood.
type stalled struct {
	ln   net.Listener
	mu   sync.Mutex
	held []net.Conn
}

func startStalled(addr string) (*stalled, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &stalled{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.held = append(s.held, c)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// close stops accepting and closes what it held.
func (s *stalled) close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.held {
		c.Close()
	}
}

// stallCmd runs a stalled upstream until SIGINT or SIGTERM.
func stallCmd(args []string) error {
	fs := flag.NewFlagSet("stall", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:39096", "address to listen on, HOST:PORT")
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := startStalled(*listen)
	if err != nil {
		return err
	}
	fmt.Printf("kbench stalled upstream listening on %s (accepts, never reads)\n", s.ln.Addr())
	waitForStop()
	s.close()
	return nil
}
