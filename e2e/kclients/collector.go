package kclients

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// The consumers of the sarama, kafka-go and confluent-kafka-go drivers
// report into a groupCollector, which says when the run has seen enough.

// groupCollector gathers deliveries of all members until count distinct keys.
type groupCollector struct {
	mu    sync.Mutex
	count int
	got   []Delivered
	seen  map[string]bool
	errs  []error
	done  chan struct{}
	once  sync.Once
}

func newGroupCollector(count int) *groupCollector {
	return &groupCollector{count: count, seen: map[string]bool{}, done: make(chan struct{})}
}

func (c *groupCollector) add(d Delivered) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, d)
	c.seen[d.Key] = true
	if len(c.seen) >= c.count {
		c.once.Do(func() { close(c.done) })
	}
}

func (c *groupCollector) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) < 20 {
		c.errs = append(c.errs, err)
	}
}

// result is what arrived, with an error unless all keys did.
func (c *groupCollector) result(timeout time.Duration) ([]Delivered, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) < c.count {
		return c.got, fmt.Errorf("%d of %d keys after %v: %w", len(c.seen), c.count, timeout, errors.Join(c.errs...))
	}
	return c.got, nil
}
