//go:build linux && nodetest

package node_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// followedLog is a container's log as the API server streams it
// (follow=true): what has come so far, and whether the stream ended (the
// container exited). It outlives the pod, which a rolling update deletes
// together with its logs.
type followedLog struct {
	mu    sync.Mutex
	lines []string
	err   error // why the stream ended, if not at the log's end
	done  chan struct{}
}

// followLog streams a running container's log until the container ends
// or the test does.
func (c *cluster) followLog(t *testing.T, ns, pod, container string) *followedLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("https://%s:%d/api/v1/namespaces/%s/pods/%s/log?container=%s&follow=true",
		nodeIP, apiPort, ns, pod, container), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	stream := &http.Client{Transport: c.api.Transport} // no timeout: it lasts as long as the container
	resp, err := stream.Do(req)
	if err != nil {
		t.Fatalf("follow the log of %s/%s/%s: %v", ns, pod, container, err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("follow the log of %s/%s/%s: %s", ns, pod, container, resp.Status)
	}
	l := &followedLog{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			l.mu.Unlock()
		}
		l.mu.Lock()
		l.err = sc.Err()
		l.mu.Unlock()
	}()
	t.Cleanup(func() { cancel(); <-l.done })
	return l
}

// Lines returns the lines so far.
func (l *followedLog) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// String is the log so far.
func (l *followedLog) String() string { return strings.Join(l.Lines(), "\n") }

// count is how many lines so far start with prefix.
func (l *followedLog) count(prefix string) int {
	n := 0
	for _, s := range l.Lines() {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// wait waits for the stream to end (the container exited).
func (l *followedLog) wait(t *testing.T, d time.Duration, what string) {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(d):
		t.Fatalf("%s: its log stream did not end within %v", what, d)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		t.Fatalf("%s: its log stream broke (lines may be missing): %v", what, l.err)
	}
}
