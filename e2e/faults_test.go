package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/e2e/harness"
)

// Bounds of the idempotent producer run: paced so that it is still
// writing when the faults hit, capped so a fast machine cannot run away.
const (
	faultMaxRecords = 200_000
	faultBurst      = 50                    // records per tick
	faultTick       = 10 * time.Millisecond // so at most 5,000 records/s
	faultWriteCap   = 2 * time.Minute       // stop writing even if a fault hangs
)

// fault is one disruption and when the test caused and ended it.
type fault struct {
	name       string
	start, end time.Time
}

// TestIdempotentProducerSurvivesRestarts writes with an idempotent
// producer through kproxy while kproxy is restarted twice (SIGTERM, so it
// drains) and the broker once. Every acknowledged record must be in the
// topic exactly once and no key may be there twice: kproxy must neither
// lose an acknowledged write nor make the producer's retries land twice.
func TestIdempotentProducerSurvivesRestarts(t *testing.T) {
	k := harness.StartKafka(t, harness.KafkaVersions(t)[0])
	kp := harness.StartKproxy(t, "kproxy", k.ProxyAddr, k.Proxied)
	const topic = "faults-idempotent"
	k.CreateTopic(t, topic, 4)

	// A consumer long-polling an empty topic through kproxy, as real
	// deployments have: its held Fetch keeps each drain open for up to
	// FetchMaxWait while the producer reconnects.
	const idle = "faults-idle"
	k.CreateTopic(t, idle, 1)
	poller, err := kgo.NewClient(kgo.SeedBrokers(k.ProxyAddr), kgo.ConsumeTopics(idle),
		kgo.FetchMaxWait(5*time.Second), kgo.RetryTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	pollerDone := make(chan struct{})
	go func() {
		defer close(pollerDone)
		for {
			if fs := poller.PollFetches(context.Background()); fs.IsClientClosed() {
				return
			}
		}
	}()
	defer func() { poller.Close(); <-pollerDone }()

	dials := &harness.Dials{}
	var disconnects atomic.Int64
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.ProxyAddr),
		kgo.Dialer(dials.DialContext),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence stays on (the default)
		kgo.RetryTimeout(2*time.Minute),    // outlive a broker restart
		kgo.WithHooks(disconnectCounter{&disconnects}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// ackAt[i] is when record i was acknowledged (unix ns), 0 if never.
	var (
		mu       sync.Mutex
		ackAt    = make([]int64, faultMaxRecords)
		failed   int
		firstErr string
		failures = map[string]int{}
		wg       sync.WaitGroup
		stop     atomic.Bool
		produced atomic.Int64
	)
	value := []byte(strings.Repeat("v", 100))
	writerDone := make(chan struct{})
	began := time.Now()
	// Produce blocks while the buffer is full; this context bounds that
	// wait if an outage never ends.
	writeCtx, stopWriting := context.WithTimeout(context.Background(), faultWriteCap+time.Minute)
	defer stopWriting()
	go func() {
		defer close(writerDone)
		tick := time.NewTicker(faultTick)
		defer tick.Stop()
		for i := 0; i < faultMaxRecords && !stop.Load() && time.Since(began) < faultWriteCap; {
			for j := 0; j < faultBurst && i < faultMaxRecords; j, i = j+1, i+1 {
				idx := i
				wg.Add(1)
				// Produce blocks while the buffer is full (during an
				// outage), so pacing resumes where it left off.
				cl.Produce(writeCtx, &kgo.Record{Key: []byte(faultKey(idx)), Value: value}, func(_ *kgo.Record, err error) {
					defer wg.Done()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						if failed == 0 {
							firstErr = fmt.Sprintf("%s at +%v", faultKey(idx), time.Since(began).Round(time.Millisecond))
						}
						failed++
						failures[err.Error()]++
						return
					}
					ackAt[idx] = time.Now().UnixNano()
				})
				produced.Add(1)
			}
			<-tick.C
		}
	}()
	acks := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range ackAt {
			if a != 0 {
				n++
			}
		}
		return n
	}

	// The faults, with a pause of steady writing before, between and after.
	var faults []fault
	// Each fault must hit a producer that is still writing.
	steady := func(d time.Duration) {
		select {
		case <-writerDone:
			t.Fatalf("the producer stopped writing before the faults were over (%d records)", produced.Load())
		case <-time.After(d):
		}
	}
	steady(3 * time.Second)
	for i := 1; i <= 2; i++ {
		f := fault{name: fmt.Sprintf("kproxy restart %d", i), start: time.Now()}
		old := kp
		requests, failedReqs := old.Metric(t, `kproxy_requests_total{api="Produce"}`), old.Metric(t, "kproxy_requests_failed_total")
		kp = kp.Restart(t, 30*time.Second)
		f.end = time.Now()
		faults = append(faults, f)
		t.Logf("%s: down for %v (SIGTERM to ready); the old kproxy had relayed %v Produce requests, failed %v before SIGTERM; its drain said: %s",
			f.name, f.end.Sub(f.start).Round(time.Millisecond), requests, failedReqs, drainLines(old.Output()))
		if strings.Contains(old.Output(), "drain timeout") {
			t.Errorf("%s: kproxy hit its drain timeout with a producer that only waits for acks:\n%s", f.name, old.Tail(20))
		}
		steady(3 * time.Second)
	}
	f := fault{name: "broker restart", start: time.Now()}
	k.Restart(t)
	f.end = time.Now()
	faults = append(faults, f)
	t.Logf("%s: down for %v (SIGTERM to ready)", f.name, f.end.Sub(f.start).Round(time.Millisecond))
	steady(3 * time.Second)
	stop.Store(true)
	<-writerDone

	flushCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.Flush(flushCtx); err != nil {
		t.Fatalf("flushing the producer: %v (%d of %d acknowledged)", err, acks(), produced.Load())
	}
	wg.Wait()
	dials.RequireOnly(t, k.ProxyAddr)
	n := int(produced.Load())
	t.Logf("producer: %d records in %v, %d acknowledged, %d failed, %d broker disconnects seen",
		n, time.Since(began).Round(time.Millisecond), acks(), failed, disconnects.Load())
	logAckGaps(t, began, ackAt[:n], faults)

	// Read everything back on the DIRECT listener, no group, up to the
	// high watermarks.
	counts := readAllKeys(t, k.Admin(t), topic, n, kgo.SeedBrokers(k.Direct))
	var missing, dups, unacked []string
	inTopic := 0
	for i := range n {
		c := counts[i]
		inTopic += c
		switch {
		case c > 1:
			dups = append(dups, fmt.Sprintf("%s×%d", faultKey(i), c))
		case c == 0 && ackAt[i] != 0:
			missing = append(missing, faultKey(i))
		case c == 1 && ackAt[i] == 0:
			unacked = append(unacked, faultKey(i))
		}
	}
	t.Logf("topic: %d records; %d acknowledged records missing, %d keys duplicated, %d records present but not acknowledged",
		inTopic, len(missing), len(dups), len(unacked))
	if len(dups) > 0 {
		t.Errorf("%d keys are in the topic more than once (idempotence broken): %v", len(dups), head(dups))
	}
	if len(missing) > 0 {
		t.Errorf("%d acknowledged records are not in the topic: %v", len(missing), head(missing))
	}
	if failed > 0 {
		// Retries are unlimited and the retry timeout outlives every
		// outage, so a failed record means the producer met an error it
		// could not retry (a sequence or producer-id error, for example).
		t.Errorf("%d records failed although retries are unlimited (the first was %s), by error: %v", failed, firstErr, failures)
	}
	if extra := counts[-1]; extra > 0 {
		t.Errorf("%d records in the topic with keys this test did not write", extra)
	}
}

// faultKey is the unique key of record i.
func faultKey(i int) string { return fmt.Sprintf("k%07d", i) }

// disconnectCounter counts the producer's broker disconnects, to show the
// faults reached it.
type disconnectCounter struct{ n *atomic.Int64 }

func (d disconnectCounter) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { d.n.Add(1) }

// drainLines is kproxy's log lines about draining, for the test log.
func drainLines(out string) string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "drain") && !strings.Contains(l, "connection closed") {
			ls = append(ls, strings.TrimSpace(l))
		}
	}
	closed := strings.Count(out, `"reason":"drained"`)
	timedOut := strings.Count(out, `"reason":"drain timeout"`)
	return fmt.Sprintf("%v; %d connections closed drained, %d at the drain timeout", ls, closed, timedOut)
}

// logAckGaps logs, for each fault, the longest stretch without any
// acknowledgement that began in its window (from 1s before it to 10s
// after it ended, or to the next fault): how long the fault was visible
// to the producer.
func logAckGaps(t *testing.T, began time.Time, ackAt []int64, faults []fault) {
	t.Helper()
	times := make([]int64, 0, len(ackAt))
	for _, a := range ackAt {
		if a != 0 {
			times = append(times, a)
		}
	}
	slices.Sort(times)
	for i, f := range faults {
		from, to := f.start.UnixNano(), f.end.Add(10*time.Second).UnixNano()
		if i+1 < len(faults) {
			to = min(to, faults[i+1].start.UnixNano())
		}
		var best, bestAt int64
		for i := 1; i < len(times); i++ {
			a, b := times[i-1], times[i]
			if a < from-int64(time.Second) || a >= to {
				continue // the pause began outside this fault's window
			}
			if g := b - a; g > best {
				best, bestAt = g, a
			}
		}
		t.Logf("%s (at +%v, lasted %v): longest pause in acknowledgements %v, from +%v",
			f.name, f.start.Sub(began).Round(time.Millisecond), f.end.Sub(f.start).Round(time.Millisecond),
			time.Duration(best).Round(time.Millisecond), time.Duration(bestAt-began.UnixNano()).Round(time.Millisecond))
	}
}

// readAllKeys consumes topic with a client made of opts (its seeds and
// dialer) from the start to the high watermarks that adm lists, and counts
// each key written by faultKey (index -1 counts foreign keys).
func readAllKeys(t *testing.T, adm *kadm.Client, topic string, n int, opts ...kgo.Opt) map[int]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("listing end offsets: %v", err)
	}
	want := map[int32]int64{}
	start := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s[%d]: %v", topic, o.Partition, o.Err)
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	counts := make(map[int]int, n)
	if len(want) == 0 {
		return counts
	}
	cons, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: %v (at %v, want %v)", topic, ctx.Err(), next, want)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("reading %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= want[r.Partition] {
				return // written after the end offsets were listed
			}
			next[r.Partition] = r.Offset + 1
			i, err := strconv.Atoi(strings.TrimPrefix(string(r.Key), "k"))
			if err != nil || i < 0 || i >= n || faultKey(i) != string(r.Key) {
				i = -1
			}
			counts[i]++
		})
	}
	return counts
}

func head(s []string) []string { return s[:min(len(s), 10)] }

// TestVanishingClientLeaksNothing makes clients disappear through kproxy in
// the awkward moments (a request held by the broker, half a frame, a reset
// after a request, a real client closed mid long-poll, a client process
// killed mid-produce) and requires that each leaves neither a pair in
// kproxy's count nor a TCP connection from kproxy to the broker: a pair
// that outlives its client holds a broker connection forever.
func TestVanishingClientLeaksNothing(t *testing.T) {
	k := harness.StartKafka(t, harness.KafkaVersions(t)[0])
	kp := harness.StartKproxy(t, "kproxy", k.ProxyAddr, k.Proxied)
	const topic = "faults-vanish" // stays empty, so a Fetch is held
	k.CreateTopic(t, topic, 1)
	const wait = 15 * time.Second // longer than the leak check's deadline

	// The raw frames must be right for the cases below to mean anything:
	// a Metadata round trip through kproxy proves it.
	t.Run("control", func(t *testing.T) {
		paired := kp.Metric(t, "kproxy_connections_total")
		c := dialKproxy(t, kp)
		defer c.Close()
		writeFrame(t, c, metadataRequest(), 7)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp := readFrame(t, c)
		if got := int32(binary.BigEndian.Uint32(resp)); got != 7 {
			t.Fatalf("Metadata response has correlation id %d, want 7", got)
		}
		c.Close()
		requireNoLeak(t, kp, k, paired)
	})

	t.Run("fetch held by the broker, closed at once", func(t *testing.T) {
		paired := kp.Metric(t, "kproxy_connections_total")
		c := dialKproxy(t, kp)
		writeFrame(t, c, fetchRequest(topic, wait), 1)
		c.Close()
		requireNoLeak(t, kp, k, paired)
	})

	t.Run("fetch held by the broker, closed once in flight", func(t *testing.T) {
		paired := kp.Metric(t, "kproxy_connections_total")
		failed := kp.Metric(t, "kproxy_requests_failed_total")
		c := dialKproxy(t, kp)
		defer c.Close()
		writeFrame(t, c, fetchRequest(topic, wait), 1)
		waitMetric(t, kp, "kproxy_in_flight_requests", 1)
		// The positive control of the leak check: the pair's upstream
		// connection is visible while the client is there.
		if up, err := harness.EstablishedTo(kp.Pid(), k.Proxied); err != nil || len(up) != 1 {
			t.Fatalf("kproxy holds %v to the broker while a fetch is in flight (err %v), want exactly one", up, err)
		}
		c.Close()
		requireNoLeak(t, kp, k, paired)
		if got := kp.Metric(t, "kproxy_requests_failed_total") - failed; got != 1 {
			t.Errorf("kproxy_requests_failed_total grew by %v, want 1 (the abandoned fetch)", got)
		}
	})

	t.Run("half a frame", func(t *testing.T) {
		paired := kp.Metric(t, "kproxy_connections_total")
		c := dialKproxy(t, kp)
		b := binary.BigEndian.AppendUint32(nil, 100)
		b = append(b, make([]byte, 16)...) // 20 bytes of a 104-byte frame
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		waitMetric(t, kp, "kproxy_connections_open", 1)
		c.Close()
		requireNoLeak(t, kp, k, paired)
	})

	t.Run("reset after Metadata", func(t *testing.T) {
		paired := kp.Metric(t, "kproxy_connections_total")
		c := dialKproxy(t, kp)
		writeFrame(t, c, metadataRequest(), 3)
		c.(*net.TCPConn).SetLinger(0) // Close sends RST
		c.Close()
		requireNoLeak(t, kp, k, paired)
	})

	t.Run("franz-go closed mid long-poll", func(t *testing.T) {
		paired := kp.Metric(t, "kproxy_connections_total")
		fetches := kp.Metric(t, `kproxy_requests_total{api="Fetch"}`)
		cl, err := kgo.NewClient(kgo.SeedBrokers(kp.Addr), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(wait))
		if err != nil {
			t.Fatal(err)
		}
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			cl.PollFetches(context.Background()) // returns once the client is closed
		}()
		deadline := time.Now().Add(20 * time.Second)
		for kp.Metric(t, `kproxy_requests_total{api="Fetch"}`) == fetches || kp.Metric(t, "kproxy_in_flight_requests") < 1 {
			if time.Now().After(deadline) {
				t.Fatal("franz-go sent no Fetch through kproxy within 20s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		cl.Close()
		<-polled
		requireNoLeak(t, kp, k, paired)
	})

	t.Run("producer process killed", func(t *testing.T) {
		paired := kp.Metric(t, "kproxy_connections_total")
		produces := kp.Metric(t, `kproxy_requests_total{api="Produce"}`)
		child := harness.Start(t, "producer-child", os.Args[0], nil,
			harness.Env(childProducerEnv+"="+kp.Addr+","+topic), "")
		deadline := time.Now().Add(60 * time.Second)
		for kp.Metric(t, `kproxy_requests_total{api="Produce"}`)-produces < 20 {
			if time.Now().After(deadline) {
				t.Fatalf("the child producer made fewer than 20 Produce requests through kproxy in 60s:\n%s", child.Tail(20))
			}
			select {
			case <-child.Exited():
				t.Fatalf("the child producer exited: %v\n%s", child.ExitErr(), child.Tail(20))
			case <-time.After(50 * time.Millisecond):
			}
		}
		child.Stop(syscall.SIGKILL, 10*time.Second)
		requireNoLeak(t, kp, k, paired)
	})
}

// childProducerEnv carries "kproxy-addr,topic" to childProducer.
const childProducerEnv = "KPROXY_FAULTS_CHILD_PRODUCER"

// childProducer is the body of the producer process that
// TestVanishingClientLeaksNothing kills with SIGKILL mid-produce: the test
// binary run again with childProducerEnv set (see TestMain). It writes
// until it is killed.
func childProducer(spec string) {
	addr, topic, _ := strings.Cut(spec, ",")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child producer:", err)
		os.Exit(1)
	}
	value := []byte(strings.Repeat("x", 1000))
	for {
		cl.Produce(context.Background(), &kgo.Record{Value: value}, nil)
	}
}

// requireNoLeak waits up to 5s (less than a held fetch's wait) after
// kproxy paired a connection beyond pairedBefore (its
// kproxy_connections_total before the client came) for kproxy to count
// no open connection and hold no TCP connection to the broker's
// PROXIED listener.
func requireNoLeak(t *testing.T, kp *harness.Kproxy, k *harness.Kafka, pairedBefore float64) {
	t.Helper()
	start := time.Now()
	// A check made before kproxy paired the connection would prove
	// nothing, so first wait (up to 3s) for the pairing to show.
	for kp.Metric(t, "kproxy_connections_total") <= pairedBefore {
		if time.Since(start) > 3*time.Second {
			t.Logf("kproxy never paired the vanished client's connection (turned away before its upstream dial)")
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline := start.Add(5 * time.Second)
	for {
		open := kp.Metric(t, "kproxy_connections_open")
		up, err := harness.EstablishedTo(kp.Pid(), k.Proxied)
		if err != nil {
			t.Fatalf("reading kproxy's sockets: %v", err)
		}
		if open == 0 && len(up) == 0 {
			t.Logf("kproxy let go of everything %v after the client vanished (requests failed so far: %v)",
				time.Since(start).Round(time.Millisecond), kp.Metric(t, "kproxy_requests_failed_total"))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after the client vanished kproxy still counts %v open connections and holds %d to the broker %s: %v\n%s",
				open, len(up), k.Proxied, up, kp.Tail(10))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitMetric waits up to 10s for a kproxy gauge to reach at least want.
func waitMetric(t *testing.T, kp *harness.Kproxy, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for kp.Metric(t, series) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed below %v for 10s", series, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dialKproxy(t *testing.T, kp *harness.Kproxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", kp.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeFrame writes req as one whole request frame: size, header (with a
// client id) and body, as kmsg formats it.
func writeFrame(t *testing.T, c net.Conn, req kmsg.Request, correlationID int32) {
	t.Helper()
	b := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kproxy-e2e-faults")).AppendRequest(nil, req, correlationID)
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// readFrame reads one response frame and returns it without its size.
func readFrame(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	return b
}

// metadataRequest asks for every topic (v12, flexible: Kafka 4 dropped
// the oldest versions).
func metadataRequest() kmsg.Request {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 12
	return r
}

// fetchRequest reads partition 0 of topic from offset 0, waiting up to
// wait for at least one byte: on an empty topic the broker holds it.
func fetchRequest(topic string, wait time.Duration) kmsg.Request {
	r := kmsg.NewPtrFetchRequest()
	r.Version = 11 // topic names, not ids; supported by Kafka 3 and 4
	r.ReplicaID = -1
	r.MaxWaitMillis = int32(wait / time.Millisecond)
	r.MinBytes = 1
	r.MaxBytes = 1 << 20
	r.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = 0
	fp.FetchOffset = 0
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	r.Topics = append(r.Topics, ft)
	return r
}
