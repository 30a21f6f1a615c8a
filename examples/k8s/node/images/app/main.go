// Command app is the node tests' application image: a franz-go client
// that checks its first connection, produces records idempotently and
// reads them back, printing one line per fact the tests look for.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	topic := flag.String("topic", "node-test", "topic")
	count := flag.Int("count", 100, "records to produce and read back; 0: produce until SIGTERM")
	interval := flag.Duration("interval", 0, "pause between records")
	firstDial := flag.Bool("first-dial", true, "check that the very first connection and request succeed, with no retry")
	read := flag.Bool("read", true, "read the records back")
	hold := flag.Bool("hold", false, "once done, wait for SIGTERM: a Deployment's container must not exit")
	linger := flag.Duration("linger", 0, "with --count 0: after SIGTERM, go on producing this long before closing, as an app flushing on shutdown does")
	flag.Parse()
	if *firstDial {
		if err := apiVersionsOnce(strings.Split(*brokers, ",")[0]); err != nil {
			fmt.Printf("first-dial failed: %v\n", err)
			os.Exit(3)
		}
		fmt.Println("first-dial ok")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.DefaultProduceTopic(*topic),
		kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		fmt.Println("client:", err)
		os.Exit(1)
	}
	defer cl.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	produced := 0
	var stopping time.Time
	for i := 0; *count == 0 || i < *count; i++ {
		if ctx.Err() != nil {
			if stopping.IsZero() {
				stopping = time.Now()
				fmt.Printf("SIGTERM: producing %v more\n", *linger)
			}
			if time.Since(stopping) >= *linger {
				break
			}
		}
		r := &kgo.Record{Key: []byte(run), Value: []byte(fmt.Sprintf("%s-%d", run, i))}
		pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(pctx, r).FirstErr()
		cancel()
		if err != nil {
			fmt.Printf("produce %d failed: %v\n", i, err)
			os.Exit(1)
		}
		produced++
		fmt.Printf("acked %s\n", r.Value)
		if *interval > 0 {
			select {
			case <-ctx.Done():
				if !stopping.IsZero() { // lingering: keep the pace
					time.Sleep(*interval)
				}
			case <-time.After(*interval):
			}
		}
	}
	fmt.Printf("produced %d\n", produced)
	if !*read {
		return
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		fmt.Println("reader:", err)
		os.Exit(1)
	}
	defer rd.Close()
	seen := map[string]bool{}
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(seen) < produced && rctx.Err() == nil {
		rd.PollFetches(rctx).EachRecord(func(r *kgo.Record) {
			if string(r.Key) == run {
				seen[string(r.Value)] = true
			}
		})
	}
	if len(seen) != produced {
		fmt.Printf("read %d of %d\n", len(seen), produced)
		os.Exit(1)
	}
	fmt.Printf("read %d\n", len(seen))
	if *hold {
		<-ctx.Done()
		fmt.Println("stopped")
	}
}

// apiVersionsOnce dials addr once and sends one ApiVersions request: an
// application that starts before its sidecar is ready fails here.
func apiVersionsOnce(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "node-test", "1"
	body := req.AppendTo(nil)
	// request header v2: key, version, correlation id, client id, no tags
	head := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	head = binary.BigEndian.AppendUint16(head, uint16(req.Version))
	head = binary.BigEndian.AppendUint32(head, 1)
	head = binary.BigEndian.AppendUint16(head, uint16(len("node-test")))
	head = append(append(head, "node-test"...), 0)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(head)+len(body)))
	if _, err := c.Write(append(append(frame, head...), body...)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return fmt.Errorf("no answer: %v", err)
	}
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, resp)
	return err
}
