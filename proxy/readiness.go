package proxy

import (
	"context"
	"sync"
	"time"
)

// readyCache is how long a readiness result is reused. The kubelet probes
// every few seconds; a result this fresh says as much as a new check.
const readyCache = time.Second

// readiness runs one readiness check at a time: callers that come while
// one runs wait for its result, and one that comes within readyCache of
// the last result gets that result.
type readiness struct {
	mu      sync.Mutex
	running chan struct{} // closed when the check under way ends; nil when none runs
	err     error         // the last result
	at      time.Time     // when it was known
}

// check returns a result of run no older than readyCache, running it
// only if no caller is running it already. A caller whose ctx ends first
// gets ctx's error; the check goes on for the others.
func (r *readiness) check(ctx context.Context, run func(context.Context) error) error {
	r.mu.Lock()
	if !r.at.IsZero() && time.Since(r.at) < readyCache {
		err := r.err
		r.mu.Unlock()
		return err
	}
	running := r.running
	if running == nil {
		running = make(chan struct{})
		r.running = running
		go r.run(running, run)
	}
	r.mu.Unlock()
	select {
	case <-running:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run runs one check, bounded by its own deadline (a caller's ctx ending
// must not cut the check short for the others), and publishes its result.
func (r *readiness) run(done chan struct{}, run func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := run(ctx)
	r.mu.Lock()
	r.err, r.at, r.running = err, time.Now(), nil
	r.mu.Unlock()
	close(done)
}
