package proxy

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/policy"
)

// throttleHook records the throttles franz-go was told about.
type throttleHook struct {
	n   atomic.Int64
	max atomic.Int64 // nanoseconds
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.n.Add(1)
	for {
		cur := h.max.Load()
		if int64(d) <= cur || h.max.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// A byte-rate throttle must hold a producer that sends as fast as it can
// to the configured rate, as a broker quota would: acknowledged bytes over
// 10 s (after a 1 s warm-up that spends the bucket's one-second burst) are
// within 15% of 1 MiB/s, and franz-go hears the throttle. Batches are
// capped at 128 KiB: the bucket charges a whole request at once, so the
// window's error is about one request's bytes.
func TestPolicyThrottleProduceByteRate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 11 s")
	}
	const rate = 1 << 20 // bytes per second
	const warmup, window = time.Second, 10 * time.Second
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "rated")})
	ps := applyPolicies(t, env, policy.Rule{Name: "produce-rate", Action: policy.ActionThrottle,
		Match:  policy.Selector{APIs: []string{"Produce"}},
		Limits: policy.Limits{BytesPerSecond: rate, Key: "client_id"}})
	hook := &throttleHook{}
	via := &onlyVia{addr: env.addr}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(hook, via), kgo.ClientID("rated-producer"),
		kgo.DefaultProduceTopic("rated"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(128<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), window+warmup+30*time.Second)
	defer cancel()

	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+window)
	var counted, total atomic.Int64
	var failed error
	var fmu sync.Mutex
	sem := make(chan struct{}, 64) // records outstanding
	rng := rand.New(rand.NewPCG(1, 2))
	for time.Now().Before(until) {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			t.Fatal("producer stalled")
		}
		v := make([]byte, 1024+rng.IntN(9*1024+1))
		cl.Produce(ctx, &kgo.Record{Value: v}, func(r *kgo.Record, err error) {
			defer func() { <-sem }()
			if err != nil {
				fmu.Lock()
				failed = err
				fmu.Unlock()
				return
			}
			total.Add(int64(len(r.Value)))
			if now := time.Now(); now.After(from) && now.Before(until) {
				counted.Add(int64(len(r.Value)))
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if failed != nil {
		t.Fatalf("produce: %v", failed)
	}
	got := float64(counted.Load()) / window.Seconds()
	t.Logf("acknowledged %.0f B/s over %v after %v warm-up (%.1f%% of %d); %d bytes in all; %d throttles, longest %v",
		got, window, warmup, 100*got/rate, rate, total.Load(), hook.n.Load(), time.Duration(hook.max.Load()))
	if got < 0.85*rate || got > 1.15*rate {
		t.Errorf("acknowledged %.0f B/s, want %d ±15%%", got, rate)
	}
	if hook.n.Load() == 0 || hook.max.Load() <= 0 {
		t.Error("franz-go was never told to back off (OnBrokerThrottle)")
	}
	if n := ps.count(t, "kproxy_policy_throttled_total", "produce-rate"); n == 0 {
		t.Error("kproxy_policy_throttled_total not raised for the rule")
	}
	via.check(t)
}
