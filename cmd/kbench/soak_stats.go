package main

import (
	"sync"
	"time"
)

// Kinds of soak operation. Each has its own latency histogram and counts.
const (
	kindProduce   = "produce"   // a paced producer's synchronous Produce
	kindThrottled = "throttled" // the producer the rate rule throttles
	kindFetch     = "fetch"     // a fetcher's Fetch (no wait)
	kindCommit    = "commit"    // a group member's offset commit
	kindConsume   = "consume"   // a group member's poll that returned records
	kindJoin      = "join"      // a new group member's join, until its first assignment
	kindChurn     = "churn"     // connect, Metadata, Produce, close: one cycle
)

// soakKinds is every kind, in the order reports list them.
var soakKinds = []string{kindProduce, kindThrottled, kindFetch, kindCommit, kindConsume, kindJoin, kindChurn}

// requestKinds are the kinds whose latency is one request's round trip:
// the CSV's p99 column merges them.
var requestKinds = []string{kindProduce, kindFetch, kindCommit}

// kindTally is one kind's counts over a window or a whole run.
type kindTally struct {
	Hist    *histogram
	Ops     int64
	Errors  int64
	LastErr error
}

// soakStats collects the load's operations by kind; the sampler takes a
// window of them every 10 s (take), and the totals keep the whole run.
type soakStats struct {
	mu     sync.Mutex
	window map[string]*kindTally
	totals map[string]*kindTally
	// throttles counts the responses whose throttle time was set (franz-go's
	// throttle hook), so the run shows the rate rule was exercised: in the
	// window and in all.
	throttles, windowThrottles int64
}

func newSoakStats() *soakStats {
	return &soakStats{window: newTallies(), totals: newTallies()}
}

func newTallies() map[string]*kindTally {
	m := make(map[string]*kindTally, len(soakKinds))
	for _, k := range soakKinds {
		m[k] = &kindTally{Hist: newHistogram()}
	}
	return m
}

// record counts one operation of kind: its latency when err is nil, an
// error otherwise.
func (s *soakStats) record(kind string, d time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range []map[string]*kindTally{s.window, s.totals} {
		t := m[kind]
		if err != nil {
			t.Errors++
			t.LastErr = err
			continue
		}
		t.Ops++
		t.Hist.record(d)
	}
}

func (s *soakStats) throttled() {
	s.mu.Lock()
	s.throttles++
	s.windowThrottles++
	s.mu.Unlock()
}

// take returns the window since the last take, with its throttles, and
// starts a new one.
func (s *soakStats) take() (map[string]*kindTally, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, th := s.window, s.windowThrottles
	s.window, s.windowThrottles = newTallies(), 0
	return w, th
}

// total returns a copy of the whole run's counts and the throttles seen.
func (s *soakStats) total() (map[string]kindTally, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]kindTally, len(s.totals))
	for k, t := range s.totals {
		h := newHistogram()
		h.merge(t.Hist)
		out[k] = kindTally{Hist: h, Ops: t.Ops, Errors: t.Errors, LastErr: t.LastErr}
	}
	return out, s.throttles
}

// mergedP99 is the p99 of the kinds named, merged.
func mergedP99(w map[string]*kindTally, kinds []string) time.Duration {
	h := newHistogram()
	for _, k := range kinds {
		h.merge(w[k].Hist)
	}
	return h.quantile(0.99)
}
