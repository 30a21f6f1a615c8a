package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// clientsConfig is a real-client run: one franz-go producer and one
// consumer group member against Bootstrap for Duration.
type clientsConfig struct {
	Bootstrap  string
	Topic      string
	Size       int // record value bytes
	Duration   time.Duration
	MaxRecords int64
}

// clientsResult counts what the producer got acked and what the consumer
// received.
type clientsResult struct {
	Produced, ProducedBytes int64
	Consumed, ConsumedBytes int64
	ProduceErrors           int64
	Elapsed                 time.Duration
}

// runClients drives franz-go as an application would: an idempotent
// producer with its default batching and a group consumer reading what is
// produced from the end of the topic. This is the macro benchmark: its
// figures include the client libraries and, against Kafka, the broker.
func runClients(ctx context.Context, cfg clientsConfig) (clientsResult, error) {
	var res clientsResult
	if cfg.Bootstrap == "" || cfg.Duration <= 0 || cfg.Size < 0 || cfg.MaxRecords < 1 {
		return res, errors.New("--bootstrap, a positive -t and --max-records, and -s >= 0 are required")
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(cfg.Bootstrap), kgo.DefaultProduceTopic(cfg.Topic),
		kgo.AllowAutoTopicCreation(), kgo.MaxBufferedRecords(10_000), kgo.ClientID("kbench-producer"))
	if err != nil {
		return res, err
	}
	defer prod.Close()
	group := "kbench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cons, err := kgo.NewClient(kgo.SeedBrokers(cfg.Bootstrap), kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumerGroup(group), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.ClientID("kbench-consumer"), kgo.DisableAutoCommit())
	if err != nil {
		return res, err
	}
	defer cons.Close()

	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var firstErr atomic.Value
	wg.Go(func() { // consumer
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
					firstErr.CompareAndSwap(nil, fmt.Errorf("consume: %w", err))
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				res.Consumed++
				res.ConsumedBytes += int64(len(r.Key) + len(r.Value))
			})
		}
	})
	value := make([]byte, cfg.Size)
	var produced, producedBytes, failed atomic.Int64
	var inFlight sync.WaitGroup
	for n := int64(0); n < cfg.MaxRecords && ctx.Err() == nil; n++ {
		inFlight.Add(1)
		prod.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			defer inFlight.Done()
			if err != nil {
				if ctx.Err() == nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("produce: %w", err))
				}
				return
			}
			produced.Add(1)
			producedBytes.Add(int64(len(r.Value)))
		})
	}
	cancel()
	res.Elapsed = time.Since(start)
	inFlight.Wait() // the context is done, so buffered records fail at once
	wg.Wait()
	res.Produced, res.ProducedBytes, res.ProduceErrors = produced.Load(), producedBytes.Load(), failed.Load()
	if err, _ := firstErr.Load().(error); err != nil {
		return res, err
	}
	return res, nil
}

// clientsCmd runs the real-client mode and prints its rates.
func clientsCmd(args []string) error {
	fs := flag.NewFlagSet("clients", flag.ContinueOnError)
	var cfg clientsConfig
	fs.StringVar(&cfg.Bootstrap, "bootstrap", "", "bootstrap broker (or kproxy) address, HOST:PORT")
	fs.StringVar(&cfg.Topic, "topic", "kbench", "topic to produce to and consume (auto-created when the broker allows)")
	fs.IntVar(&cfg.Size, "s", 100, "record value bytes")
	fs.DurationVar(&cfg.Duration, "t", 10*time.Second, "duration")
	fs.Int64Var(&cfg.MaxRecords, "max-records", 100_000_000, "stop producing after this many records")
	if err := parse(fs, args); err != nil {
		return err
	}
	res, err := runClients(context.Background(), cfg)
	secs := res.Elapsed.Seconds()
	if secs > 0 {
		fmt.Printf("kbench clients: %s, topic %s, %d-byte values, %v (franz-go; the consumer's group join is included)\n",
			cfg.Bootstrap, cfg.Topic, cfg.Size, cfg.Duration)
		fmt.Printf("produced  %10d records  %10.0f records/s  %8.2f MB/s\n", res.Produced, float64(res.Produced)/secs, float64(res.ProducedBytes)/secs/1e6)
		fmt.Printf("consumed  %10d records  %10.0f records/s  %8.2f MB/s\n", res.Consumed, float64(res.Consumed)/secs, float64(res.ConsumedBytes)/secs/1e6)
	}
	return err
}
