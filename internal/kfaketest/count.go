// Package kfaketest holds test helpers around kfake shared by several
// packages' tests.
package kfaketest

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CountKeys counts every request of each API key c receives, leaving it
// to kfake to answer them, and returns a reader of the counts.
func CountKeys(c *kfake.Cluster) func(key int16) int {
	var mu sync.Mutex
	n := map[int16]int{}
	c.Control(func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		n[kreq.Key()]++
		mu.Unlock()
		return nil, nil, false
	})
	return func(key int16) int {
		mu.Lock()
		defer mu.Unlock()
		return n[key]
	}
}
