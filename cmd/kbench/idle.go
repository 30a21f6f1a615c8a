package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// idleConfig is one idle run: open Conns connections to Addr, make one
// round trip on each so a proxy has paired it with its upstream, hold them
// all for Hold, and read PID's resident memory before and after.
type idleConfig struct {
	Addr  string
	PID   int
	Conns int
	Hold  time.Duration
}

// idleResult is what an idle run measured.
type idleResult struct {
	Opened          int
	Before, Holding int64         // RSS of the measured process, bytes
	HoldCPU         time.Duration // CPU the process used while they were held
}

// runIdle opens the connections with a few dialers at once (a proxy's
// accept loop is what is being measured, not the dial rate), checks each
// one answers an ApiVersions request, and holds them.
func runIdle(cfg idleConfig) (idleResult, error) {
	var res idleResult
	var err error
	if res.Before, err = processRSS(cfg.PID); err != nil {
		return res, err
	}
	conns := make([]net.Conn, cfg.Conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	frame := requestFrame(kmsg.NewPtrApiVersionsRequest(), 1, "kbench-idle")
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	const dialers = 16
	for d := range dialers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := d; i < cfg.Conns; i += dialers {
				c, err := openIdle(cfg.Addr, frame)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("connection %d: %w", i, err)
				}
				conns[i] = c
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			res.Opened++
		}
	}
	if firstErr != nil {
		return res, firstErr
	}
	cpu0, err := processCPU(cfg.PID)
	if err != nil {
		return res, err
	}
	time.Sleep(cfg.Hold) // let the proxy settle (GC, freed dial state)
	cpu1, err := processCPU(cfg.PID)
	if err != nil {
		return res, err
	}
	res.HoldCPU = cpu1 - cpu0
	res.Holding, err = processRSS(cfg.PID)
	return res, err
}

// openIdle dials addr and makes one ApiVersions round trip.
func openIdle(addr string, frame []byte) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(frame); err != nil {
		c.Close()
		return nil, err
	}
	var buf []byte
	if _, err := readFrame(bufio.NewReaderSize(c, 512), &buf); err != nil {
		c.Close()
		return nil, fmt.Errorf("no ApiVersions response: %w", err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

func idleCmd(args []string) error {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	var cfg idleConfig
	fs.StringVar(&cfg.Addr, "addr", "", "kproxy (or any proxy) address, HOST:PORT")
	fs.IntVar(&cfg.PID, "pid", 0, "process id whose resident memory is measured")
	fs.IntVar(&cfg.Conns, "n", 10000, "connections to open and hold")
	fs.DurationVar(&cfg.Hold, "hold", 5*time.Second, "how long to hold them before measuring")
	if err := parse(fs, args); err != nil {
		return err
	}
	if cfg.Addr == "" || cfg.PID <= 0 || cfg.Conns < 1 || cfg.Hold <= 0 {
		err := fmt.Errorf("--addr, --pid, -n >= 1 and --hold > 0 are required")
		fmt.Fprintln(fs.Output(), err)
		return usageError{err}
	}
	res, err := runIdle(cfg)
	fmt.Printf("kbench idle: %d of %d connections open to %s, each answered one ApiVersions\n", res.Opened, cfg.Conns, cfg.Addr)
	if res.Holding > 0 {
		per := float64(res.Holding-res.Before) / float64(max(res.Opened, 1))
		fmt.Printf("  pid %d RSS: %s before, %s holding them (%.1f KiB per connection)\n",
			cfg.PID, mib(res.Before), mib(res.Holding), per/1024)
		fmt.Printf("  pid %d CPU while holding them: %v in %v (%.2f%% of one core)\n",
			cfg.PID, res.HoldCPU.Round(time.Millisecond), cfg.Hold, 100*res.HoldCPU.Seconds()/cfg.Hold.Seconds())
	}
	return err
}
