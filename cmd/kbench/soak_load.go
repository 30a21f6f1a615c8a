package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// hotClientID is the producer the soak's rate rule is written for
// (bench/soak.sh throttles Produce from this client id).
const hotClientID = "kbench-soak-hot"

// soakGroup is the consumer group the soak's members join.
const soakGroup = "kbench-soak"

// soakLoad runs the soak's clients until ctx ends, recording into stats.
type soakLoad struct {
	cfg   soakConfig
	stats *soakStats
	value []byte
}

// run starts every worker and returns once all have stopped.
func (l *soakLoad) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range l.cfg.Producers {
		wg.Go(func() { l.producer(ctx, fmt.Sprintf("kbench-soak-producer-%d", i), kindProduce, l.cfg.ProduceRate) })
	}
	if l.cfg.HotRate > 0 {
		wg.Go(func() { l.producer(ctx, hotClientID, kindThrottled, l.cfg.HotRate) })
	}
	for i := range l.cfg.Fetchers {
		wg.Go(func() { l.fetcher(ctx, i) })
	}
	if l.cfg.Members > 0 {
		wg.Go(func() { l.group(ctx) })
	}
	for i := range l.cfg.Churn {
		wg.Go(func() { l.churner(ctx, i) })
	}
	wg.Wait()
}

// fail records err against kind unless the run is over (errors from
// cancelled calls at the end are not the proxy's).
func (l *soakLoad) fail(ctx context.Context, kind string, err error) {
	if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		l.stats.record(kind, 0, err)
	}
}

// throttleHook counts responses that carried a throttle time.
type throttleHook struct{ stats *soakStats }

func (h throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.stats.throttled()
	}
}

func (l *soakLoad) client(clientID string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(l.cfg.Bootstrap), kgo.ClientID(clientID),
		kgo.DefaultProduceTopic(l.cfg.Topic), kgo.ProducerLinger(0), kgo.WithHooks(throttleHook{l.stats})}, extra...)
	return kgo.NewClient(opts...)
}

// tick waits for the next tick or the end of the run.
func tick(ctx context.Context, t *time.Ticker) bool {
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// producer produces one record per tick, synchronously, so each Produce
// request is one record and its latency is the request's.
func (l *soakLoad) producer(ctx context.Context, clientID, kind string, rate float64) {
	cl, err := l.client(clientID)
	if err != nil {
		l.fail(ctx, kind, err)
		return
	}
	defer cl.Close()
	t := time.NewTicker(perSecond(rate))
	defer t.Stop()
	for tick(ctx, t) {
		start := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: l.value}).FirstErr(); err != nil {
			l.fail(ctx, kind, fmt.Errorf("produce as %s: %w", clientID, err))
			continue
		}
		l.stats.record(kind, time.Since(start), nil)
	}
}

// fetcher sends Fetch requests that do not wait (max_wait 0) for one
// partition at a fixed rate, each from 20 records below the high
// watermark, so every answer carries a few recent records. Fetch v12 and
// below name their topic, so no topic id is needed.
func (l *soakLoad) fetcher(ctx context.Context, i int) {
	cl, err := l.client(fmt.Sprintf("kbench-soak-fetcher-%d", i), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		l.fail(ctx, kindFetch, err)
		return
	}
	defer cl.Close()
	partition := int32(i % max(l.cfg.Partitions, 1))
	var offset int64
	t := time.NewTicker(perSecond(l.cfg.FetchRate))
	defer t.Stop()
	for tick(ctx, t) {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = l.cfg.Topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 64<<10
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		kresp, err := cl.Request(ctx, req)
		if err != nil {
			l.fail(ctx, kindFetch, fmt.Errorf("fetch: %w", err))
			continue
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := fetchError(resp); err != nil {
			l.fail(ctx, kindFetch, err)
			continue
		}
		l.stats.record(kindFetch, time.Since(start), nil)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				offset = max(0, p.HighWatermark-20)
			}
		}
	}
}

// fetchError is the first error code in a Fetch response, or nil.
func fetchError(resp *kmsg.FetchResponse) error {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("fetch %s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// churner opens a client, produces one record (the client's Metadata and
// the Produce: franz-go opens three connections for them, the seed's and
// two to the broker), holds the connections for about ChurnHold and closes
// them, over and over: with Churn churners, connections keep opening and
// closing through the proxy.
func (l *soakLoad) churner(ctx context.Context, i int) {
	hold := func() time.Duration { return time.Duration(float64(l.cfg.ChurnHold) * (0.5 + rand.Float64())) }
	clientID := fmt.Sprintf("kbench-soak-churn-%d", i)
	if !sleepCtx(ctx, time.Duration(rand.Int64N(int64(l.cfg.ChurnHold)+1))) { // spread the first cycles
		return
	}
	for ctx.Err() == nil {
		if err := l.churnOnce(ctx, clientID, hold()); err != nil {
			l.fail(ctx, kindChurn, err)
			sleepCtx(ctx, hold())
		}
	}
}

// churnOnce is one cycle; its latency runs from the client's start to the
// produce's ack (the hold is not in it).
func (l *soakLoad) churnOnce(ctx context.Context, clientID string, hold time.Duration) error {
	start := time.Now()
	cl, err := l.client(clientID, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: l.value}).FirstErr(); err != nil {
		return fmt.Errorf("churn produce: %w", err)
	}
	l.stats.record(kindChurn, time.Since(start), nil)
	sleepCtx(ctx, hold)
	return nil
}

// sleepCtx sleeps d or until ctx ends; false if it ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
