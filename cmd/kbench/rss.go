package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// processRSS is a process's resident set size in bytes, from the VmRSS
// line of /proc/PID/status.
func processRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: VmRSS %q", pid, rest)
		}
		return kb << 10, nil
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS line", pid)
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// rssPeak samples a process's RSS every 10 ms from its start until stop,
// for the modes that report a peak under load (flood, hostile).
type rssPeak struct {
	Before, Peak int64
	err          error
	stopc        chan struct{}
	done         chan struct{}
}

// watchRSS reads pid's RSS once, then samples it in the background.
func watchRSS(pid int) (*rssPeak, error) {
	before, err := processRSS(pid)
	if err != nil {
		return nil, err
	}
	w := &rssPeak{Before: before, Peak: before, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stopc:
				return
			case <-t.C:
				rss, err := processRSS(pid)
				if err != nil {
					w.err = err
					return
				}
				w.Peak = max(w.Peak, rss)
			}
		}
	}()
	return w, nil
}

// stop ends the sampling; Peak is final once it returns.
func (w *rssPeak) stop() error {
	close(w.stopc)
	<-w.done
	return w.err
}
