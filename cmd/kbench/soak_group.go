package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// group runs Members consumers in one consumer group and, every Rejoin,
// replaces one of them (it leaves, a new member joins), so joins,
// rebalances and commits go on through the whole soak.
func (l *soakLoad) group(ctx context.Context) {
	type slot struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	var mu sync.Mutex
	next := 0
	start := func() slot {
		mu.Lock()
		id := next
		next++
		mu.Unlock()
		mctx, cancel := context.WithCancel(ctx)
		s := slot{cancel, make(chan struct{})}
		go func() {
			defer close(s.done)
			l.member(mctx, id)
		}()
		return s
	}
	stop := func(s slot) { s.cancel(); <-s.done }
	slots := make([]slot, l.cfg.Members)
	for i := range slots {
		slots[i] = start()
	}
	defer func() {
		for _, s := range slots {
			stop(s)
		}
	}()
	if l.cfg.Rejoin <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(l.cfg.Rejoin)
	defer t.Stop()
	for i := 0; tick(ctx, t); i++ {
		k := i % len(slots)
		stop(slots[k])
		slots[k] = start()
	}
}

// member consumes the soak topic in the group from its end, commits what
// it consumed at most every CommitEvery, and leaves the group when ctx
// ends. Its join is timed from its start to its first assignment.
func (l *soakLoad) member(ctx context.Context, id int) {
	began := time.Now()
	var joined sync.Once
	cl, err := l.client(fmt.Sprintf("kbench-soak-member-%d", id),
		kgo.ConsumerGroup(soakGroup), kgo.ConsumeTopics(l.cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			joined.Do(func() { l.stats.record(kindJoin, time.Since(began), nil) })
		}))
	if err != nil {
		l.fail(ctx, kindJoin, err)
		return
	}
	defer cl.Close() // leaves the group
	lastCommit := time.Now()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			l.fail(ctx, kindConsume, fmt.Errorf("consume %s/%d: %w", t, p, err))
		})
		if n := fs.NumRecords(); n > 0 {
			l.stats.record(kindConsume, 0, nil)
		}
		if time.Since(lastCommit) < l.cfg.CommitEvery || len(cl.UncommittedOffsets()) == 0 {
			continue
		}
		lastCommit = time.Now()
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			l.fail(ctx, kindCommit, fmt.Errorf("commit: %w", err))
			continue
		}
		l.stats.record(kindCommit, time.Since(lastCommit), nil)
	}
}
