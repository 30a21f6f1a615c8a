package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// demoLoadInterval is the pace of demo --load: slow enough to read the
// spans it makes, steady enough to watch metrics move.
const demoLoadInterval = 200 * time.Millisecond

// demoLoad produces a record to the demo topic every demoLoadInterval and
// consumes them in a consumer group, all through kproxy at addr, until ctx
// ends; every few seconds it prints how many went each way.
func demoLoad(ctx context.Context, addr string, out io.Writer) {
	prod, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("demo-producer"))
	if err != nil {
		fmt.Fprintln(out, "demo load:", err)
		return
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID("demo-consumer"),
		kgo.ConsumerGroup("demo-group"), kgo.ConsumeTopics(demoTopic))
	if err != nil {
		fmt.Fprintln(out, "demo load:", err)
		return
	}
	defer cons.Close()

	var produced, consumed atomic.Int64
	go func() {
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachRecord(func(*kgo.Record) { consumed.Add(1) })
		}
	}()
	tick := time.NewTicker(demoLoadInterval)
	defer tick.Stop()
	report := time.NewTicker(5 * time.Second)
	defer report.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-report.C:
			fmt.Fprintf(out, "demo load: %d records produced, %d consumed through kproxy\n", produced.Load(), consumed.Load())
		case <-tick.C:
			r := &kgo.Record{Topic: demoTopic, Key: fmt.Appendf(nil, "key-%d", i%10), Value: fmt.Appendf(nil, "record %d", i)}
			prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err == nil {
					produced.Add(1)
				}
			})
		}
	}
}
