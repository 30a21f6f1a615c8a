package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kproxy/kproxy/tracing"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/embedded"
)

const demoTopic = "demo"

// demo runs kproxy in front of an embedded in-process broker, so kproxy can
// be seen working with no Kafka installed.
func demo(args []string) error {
	o, err := parseFlags("demo", args, os.Stderr)
	if err != nil {
		return err
	}
	if o.upstream != "" {
		return fmt.Errorf("demo runs its own broker; use `kproxy run --upstream` for a real one")
	}
	f, root, err := o.load()
	if err != nil {
		return err
	}
	if o.config == "" {
		f.Log.Format = "console"
		// The tour shows one trace from producer to consumer: produced
		// records get the Produce span's traceparent, and Fetch spans
		// link to the contexts of the records they return.
		f.Tracing.Propagation.Inject = true
		f.Tracing.Links.Fetch, f.Tracing.Links.Decompress = true, true
	}
	broker, err := embedded.Reserve()
	if err != nil {
		return err
	}
	f.Proxy.Upstream = broker.Addr()
	if err := f.Validate(o.config, root); err != nil {
		return err
	}
	// With no OTLP endpoint anywhere, spans are printed here instead.
	var spans sdktrace.SpanExporter
	if !tracingConfigured(f.Tracing) {
		spans = tracing.Terminal(os.Stdout)
	}
	s, err := start(f, spans)
	if err != nil {
		return err
	}
	addr := s.proxy.Addr().String()
	cluster, err := broker.Start(addr, kfake.SeedTopics(3, demoTopic), kfake.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer cluster.Close()
	if o.check {
		err := demoCheck(addr)
		s.waitSignal(closed())
		return err
	}
	fmt.Printf(`
kproxy is listening on %[1]s in front of an embedded Kafka broker (%[2]s).
Point any Kafka client at %[1]s; topic %[3]q exists. For example:

  kcat -b %[1]s -L
  echo hello | kcat -b %[1]s -P -t %[3]s
  kcat -b %[1]s -C -t %[3]s -e

%[4]s%[5]sStop with Ctrl-C.
`, addr, broker.Addr(), demoTopic, s.adminHint(), spansHint(spans != nil))
	if o.demoLoad {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			demoLoad(ctx, addr, os.Stdout)
		}()
		s.beforeDrain = func() { cancel(); <-done }
	}
	s.waitSignal(nil)
	return nil
}

// tracingConfigured reports whether spans have somewhere to go: the
// tracing section or the standard OTEL endpoint variables.
func tracingConfigured(c tracing.Config) bool {
	return c.Enabled || c.Endpoint != "" ||
		os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

func spansHint(terminal bool) string {
	if terminal {
		return "\nSpans are printed below, one line per request (set OTEL_EXPORTER_OTLP_ENDPOINT to send them to a collector instead).\n"
	}
	return "\nSpans go to the OTLP endpoint configured.\n"
}

// demoCheck produces a few records through kproxy, consumes them back and
// prints them: the one-command proof that the relay works.
func demoCheck(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(demoTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	const n = 10
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: demoTopic, Key: []byte(fmt.Sprintf("key-%d", i)), Value: []byte(fmt.Sprintf("hello %d via kproxy", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("produce through kproxy: %w", err)
		}
	}
	fmt.Printf("produced %d records to %q through %s\n", n, demoTopic, addr)
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("consume through kproxy: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			fmt.Printf("consumed %s/%d@%d %s = %s\n", r.Topic, r.Partition, r.Offset, r.Key, r.Value)
		})
	}
	fmt.Println("demo check passed: every record went through kproxy and came back")
	return nil
}

func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
