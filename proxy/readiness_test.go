package proxy

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Callers that come while a check runs share it, and a result is reused
// for readyCache: 50 concurrent readiness calls make one check (one login
// at the broker), failures included (issue 27, item 3).
func TestReadinessRunsOneCheckForConcurrentCallers(t *testing.T) {
	var r readiness
	var runs atomic.Int32
	release := make(chan struct{})
	failing := errors.New("upstream authentication failing")
	run := func(context.Context) error {
		runs.Add(1)
		<-release
		return failing
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- r.check(context.Background(), run)
		}()
	}
	waitFor(t, 10*time.Second, "the check to start", func() bool { return runs.Load() == 1 })
	time.Sleep(50 * time.Millisecond) // the other callers join it meanwhile
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, failing) {
			t.Fatalf("a caller got %v, want the shared check's failure", err)
		}
	}
	if err := r.check(context.Background(), run); !errors.Is(err, failing) {
		t.Fatalf("a caller within readyCache got %v", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d checks ran for 51 callers, want 1", n)
	}
	// Past readyCache a new check runs.
	waitFor(t, 10*time.Second, "a second check after readyCache", func() bool {
		r.check(context.Background(), run)
		return runs.Load() == 2
	})
}

// A caller whose context ends stops waiting; the check goes on and its
// result serves the next caller.
func TestReadinessCallerGivesUpAlone(t *testing.T) {
	var r readiness
	release := make(chan struct{})
	run := func(context.Context) error { <-release; return nil }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.check(ctx, run); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled caller got %v", err)
	}
	close(release)
	if err := r.check(context.Background(), run); err != nil {
		t.Fatalf("the next caller got %v", err)
	}
}
