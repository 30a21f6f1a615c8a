package kclients

import (
	"context"
	"fmt"
	"time"
)

// Admin steps poll for up to adminWait: a broker answers a create or a
// delete before every cache it serves metadata from has caught up.
const (
	adminWait = 30 * time.Second
	adminPoll = 200 * time.Millisecond
)

// awaitDescribed polls describe (the partition count of topic, or why it
// is not described yet) until it succeeds, then requires want partitions.
func awaitDescribed(ctx context.Context, topic string, want int, describe func() (int, error)) error {
	deadline := time.Now().Add(adminWait)
	for {
		n, err := describe()
		if err == nil {
			if n != want {
				return fmt.Errorf("describe %s: %d partitions, want %d", topic, n, want)
			}
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("describe %s: %w", topic, err)
		}
		time.Sleep(adminPoll)
	}
}

// awaitGone polls listed (whether topic is still listed) until it is not.
func awaitGone(ctx context.Context, topic string, listed func() (bool, error)) error {
	deadline := time.Now().Add(adminWait)
	for {
		still, err := listed()
		if err == nil && !still {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s still listed %v after its deletion (%v)", topic, adminWait, err)
		}
		time.Sleep(adminPoll)
	}
}
