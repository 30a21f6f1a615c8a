package main

import (
	"flag"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kproxy/kproxy/internal/embedded"
)

// kfakeCmd runs franz-go's kfake broker in its own process, a broker with
// real consumer groups and a real log, for loads (kbench soak) that need
// more than the null broker answers. It advertises --advertise (kproxy's
// address) in Metadata and FindCoordinator, so clients bootstrapped through
// kproxy stay on kproxy.
func kfakeCmd(args []string) error {
	fs := flag.NewFlagSet("kfake", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:29292", "address the broker listens on, HOST:PORT (kproxy's upstream)")
	advertise := fs.String("advertise", "", "address advertised to clients, HOST:PORT: kproxy's listen address (required)")
	topic := fs.String("topic", "kbench-soak", "topic created at start")
	partitions := fs.Int("partitions", 8, "partitions of --topic")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *advertise == "" {
		err := fmt.Errorf("--advertise is required")
		fmt.Fprintln(fs.Output(), err)
		return usageError{err}
	}
	b, err := embedded.ReserveAt(*listen)
	if err != nil {
		return err
	}
	c, err := b.Start(*advertise, kfake.SeedTopics(int32(*partitions), *topic), kfake.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	fmt.Printf("kbench kfake broker on %s advertising %s, topic %s with %d partitions\n", b.Addr(), *advertise, *topic, *partitions)
	waitForStop()
	c.Close()
	return nil
}
