package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/e2e/harness"
)

// TestClusterBrokerRestart writes with an idempotent producer through a
// kproxy in cluster mode while one broker of the three is stopped (a
// controlled shutdown: the leadership of its partitions moves to the
// others) and started again (the leader imbalance check gives its
// partitions back), so the producer follows leaders across kproxy's node
// listeners twice. The producer must only ever dial kproxy, no record may
// fail, and a consumer through kproxy must then read every record exactly
// once: none lost, none duplicated.
func TestClusterBrokerRestart(t *testing.T) {
	c := harness.StartKafkaCluster(t, harness.KafkaVersions(t)[0])
	kp := harness.StartClusterKproxy(t, "kproxy-cluster", c)
	const topic = "cluster-restart"
	c.CreateTopic(t, topic, clusterParts, 3) // every node holds a replica of each partition
	t.Logf("leaders by partition before the restart: %v", c.RequireLedByEvery(t, topic))
	const victim int32 = 2 // not the node kproxy bootstraps from

	dials := &harness.Dials{}
	var disconnects atomic.Int64
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(kp.Addr),
		kgo.Dialer(dials.DialContext),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence stays on (the default)
		kgo.RetryTimeout(2*time.Minute),    // outlive the broker's absence
		kgo.WithHooks(disconnectCounter{&disconnects}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Records wait in the producer's buffer under this context until they
	// are sent, so it ends only with the test, after the flush.
	writeCtx, stopWriting := context.WithTimeout(context.Background(), faultWriteCap+time.Minute)
	defer stopWriting()
	w := startPacedWriter(writeCtx, cl)
	steady := func() {
		select {
		case <-w.done:
			t.Fatalf("the producer stopped writing before the restart was over (%d records)", w.produced.Load())
		case <-time.After(3 * time.Second):
		}
	}

	steady()
	start := time.Now()
	c.StopNode(t, victim)
	moved := waitLeaders(t, c, topic, "no partition led by the stopped node", func(l map[int32]int32) bool {
		return !slices.Contains(slices.Collect(maps.Values(l)), victim)
	})
	t.Logf("node %d stopped in %v; leaders by partition %v", victim, time.Since(start).Round(time.Millisecond), moved)
	steady()
	start = time.Now()
	c.StartNode(t, victim)
	back := waitLeaders(t, c, topic, "the restarted node leading partitions again", func(l map[int32]int32) bool {
		return slices.Contains(slices.Collect(maps.Values(l)), victim)
	})
	t.Logf("node %d back and leading again %v after its start; leaders by partition %v", victim, time.Since(start).Round(time.Millisecond), back)
	steady()
	w.stop.Store(true)
	<-w.done

	flushCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.Flush(flushCtx); err != nil {
		t.Fatalf("flushing the producer: %v (%d of %d acknowledged)", err, w.acked(), w.produced.Load())
	}
	w.wg.Wait()
	dials.RequireAmong(t, kp.Addrs())
	n := int(w.produced.Load())
	t.Logf("producer: %d records, %d acknowledged, %d failed, %d broker disconnects seen; it dialled %v",
		n, w.acked(), w.failed, disconnects.Load(), dials.Addrs())
	for _, a := range kp.NodeAddrs {
		if !slices.Contains(dials.Addrs(), a) {
			t.Errorf("the producer never dialled kproxy's node listener %s: some broker's partitions were not written through kproxy", a)
		}
	}
	if w.failed > 0 {
		t.Errorf("%d records failed although retries are unlimited (the first was %s), by error: %v", w.failed, w.firstErr, w.failures)
	}

	logWarnings(t, kp.Kproxy)

	// Read everything back through kproxy, without a group, up to the
	// high watermarks the brokers list.
	readDials := &harness.Dials{}
	counts := readAllKeys(t, c.Admin(t), topic, n, kgo.SeedBrokers(kp.Addr), kgo.Dialer(readDials.DialContext))
	readDials.RequireAmong(t, kp.Addrs())
	var lost, dups []string
	read := 0
	for i := range n {
		read += counts[i]
		switch {
		case counts[i] > 1:
			dups = append(dups, fmt.Sprintf("%s×%d", faultKey(i), counts[i]))
		case counts[i] == 0 && w.ackAt[i] != 0:
			lost = append(lost, faultKey(i))
		}
	}
	t.Logf("consumer through kproxy: %d records read, %d acknowledged records lost, %d keys duplicated", read, len(lost), len(dups))
	if len(dups) > 0 {
		t.Errorf("%d keys were read more than once (idempotence broken across the leader moves): %v", len(dups), head(dups))
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged records were not read back: %v", len(lost), head(lost))
	}
	if extra := counts[-1]; extra > 0 {
		t.Errorf("%d records read with keys this test did not write", extra)
	}
}

// logWarnings logs kproxy's warning and error lines (up to 10 of them),
// what it said about the broker that went away.
func logWarnings(t *testing.T, kp *harness.Kproxy) {
	t.Helper()
	var ws []string
	for _, l := range strings.Split(kp.Output(), "\n") {
		if strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) {
			ws = append(ws, l)
		}
	}
	t.Logf("kproxy logged %d warnings and errors; the first ones:\n%s", len(ws), strings.Join(head(ws), "\n"))
}

// waitLeaders polls topic's leaders (up to 2 minutes) until done holds
// for them, and returns them; what names the awaited state.
func waitLeaders(t *testing.T, c *harness.KafkaCluster, topic, what string, done func(map[int32]int32) bool) map[int32]int32 {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l := c.Leaders(t, topic)
		if done(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 2 minutes for %s: leaders by partition %v", what, l)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// pacedWriter produces keyed records (faultKey) with cl at a steady pace
// until stopped, noting which were acknowledged. Its context bounds the
// wait of a Produce that blocks on a full buffer, and must outlive the
// producer's flush: a record whose context ends before it is sent fails.
type pacedWriter struct {
	stop     atomic.Bool
	done     chan struct{} // closed when it stopped writing
	produced atomic.Int64
	wg       sync.WaitGroup // one per record until its promise ran

	mu       sync.Mutex
	ackAt    []int64 // unix ns of record i's acknowledgement, 0 if none
	failed   int
	firstErr string
	failures map[string]int
}

func startPacedWriter(ctx context.Context, cl *kgo.Client) *pacedWriter {
	w := &pacedWriter{done: make(chan struct{}), ackAt: make([]int64, faultMaxRecords), failures: map[string]int{}}
	value := []byte(strings.Repeat("v", 100))
	began := time.Now()
	go func() {
		defer close(w.done)
		tick := time.NewTicker(faultTick)
		defer tick.Stop()
		for i := 0; i < faultMaxRecords && !w.stop.Load() && time.Since(began) < faultWriteCap; {
			for j := 0; j < faultBurst && i < faultMaxRecords; j, i = j+1, i+1 {
				idx := i
				w.wg.Add(1)
				// Produce blocks while the buffer is full, so pacing
				// resumes where it left off.
				cl.Produce(ctx, &kgo.Record{Key: []byte(faultKey(idx)), Value: value}, func(_ *kgo.Record, err error) {
					defer w.wg.Done()
					w.mu.Lock()
					defer w.mu.Unlock()
					if err != nil {
						if w.failed == 0 {
							w.firstErr = fmt.Sprintf("%s at +%v: %v", faultKey(idx), time.Since(began).Round(time.Millisecond), err)
						}
						w.failed++
						w.failures[err.Error()]++
						return
					}
					w.ackAt[idx] = time.Now().UnixNano()
				})
				w.produced.Add(1)
			}
			<-tick.C
		}
	}()
	return w
}

func (w *pacedWriter) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.ackAt {
		if a != 0 {
			n++
		}
	}
	return n
}
