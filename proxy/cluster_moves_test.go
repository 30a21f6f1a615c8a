package proxy

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceDuring hands records from..to-1 of keyOf/valueOf to cl
// (asynchronously, so that many are in flight), calls between after every
// every records (leaders moved while records are in flight), then waits
// for every record's ack and fails on the first error.
func produceDuring(ctx context.Context, t testing.TB, cl *kgo.Client, topic string, from, to, every int, between func(i int)) {
	t.Helper()
	var (
		mu    sync.Mutex
		first error
		fails int
	)
	for i := from; i < to; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: keyOf(i), Value: valueOf(i)}, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				fails++
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
		if between != nil && (i-from)%every == every-1 {
			between(i)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fails > 0 {
		t.Fatalf("%d of %d records failed, first: %v", fails, to-from, first)
	}
}

// consumer polls a franz-go client into a ledger from a goroutine, until
// it has want distinct keys or ctx ends.
//
// A record read again at the offset it was read at before is a replay by
// the client, not a duplicate: kfake answers an OffsetForLeaderEpoch for
// the last epoch it holds records of, asked after a leader change but
// before the new leader's first write, with -1 instead of the high
// watermark, and franz-go then reports lost records (ErrDataLoss) and
// reads the partition again from its start. That happens without kproxy
// too; the consumer tolerates it, counts it, and still fails on a key
// stored at two offsets, on any other fetch error, and on a value that
// differs.
type consumer struct {
	mu       sync.Mutex
	l        *ledger
	at       map[string]string // key: partition/offset it was read at
	replays  int
	dataLoss int
	err      error
	done     chan struct{}
}

func consume(ctx context.Context, cl *kgo.Client, want int) *consumer {
	c := &consumer{l: newLedger(), at: map[string]string{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			fs := cl.PollFetches(ctx)
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				where := strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
				if c.at[string(r.Key)] == where {
					c.replays++
					return
				}
				c.at[string(r.Key)] = where
				c.l.add(r.Key, r.Value)
			})
			fs.EachError(func(topic string, p int32, err error) {
				var loss *kgo.ErrDataLoss
				switch {
				case errors.As(err, &loss):
					c.dataLoss++
				case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
				case c.err == nil:
					c.err = errors.New("fetch " + topic + "/" + strconv.Itoa(int(p)) + ": " + err.Error())
				}
			})
			n, failed := len(c.l.seen), c.err != nil
			c.mu.Unlock()
			if n >= want || failed || ctx.Err() != nil {
				return
			}
		}
	}()
	return c
}

// wait waits for the consumer and fails on a fetch error or a timeout.
func (c *consumer) wait(t testing.TB, want int) *ledger {
	t.Helper()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Fatalf("after %d records: %v", len(c.l.seen), c.err)
	}
	if len(c.l.seen) < want {
		t.Fatalf("consumed %d of %d records before the deadline", len(c.l.seen), want)
	}
	if c.dataLoss > 0 {
		t.Logf("kfake's OffsetForLeaderEpoch made the consumer re-read: %d data loss reports, %d records read again at their offset", c.dataLoss, c.replays)
	}
	return c.l
}

// sumHighWatermarks is how many records kfake holds in topic: with an
// idempotent producer, exactly how many were produced.
func sumHighWatermarks(kc *kfake.Cluster, topic string) int64 {
	var n int64
	for _, p := range kc.PartitionInfos(topic) {
		n += p.HighWatermark
	}
	return n
}

// TestClusterLeadersMoveUnderLoad: while an idempotent franz-go producer
// has records in flight and a consumer reads them, partitions move
// between brokers one at a time (MoveTopicPartition) and all at once
// (ShufflePartitionLeaders). The old leaders answer NOT_LEADER with the
// new leader's endpoint (KIP-951), which kproxy rewrites; every record is
// stored and consumed exactly once, and the clients dial only kproxy.
func TestClusterLeadersMoveUnderLoad(t *testing.T) {
	const topic, partitions, n = "moving", 6, 6000
	env := startSpread(t, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dials := &dialLog{}
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	c := consume(ctx, cons, n)

	// The first records go to the leaders as spread, so that every node
	// port is used whatever the moves do later.
	produceDuring(ctx, t, prod, topic, 0, 300, n, nil)
	moves := 0
	produceDuring(ctx, t, prod, topic, 300, n, 300, func(i int) {
		moves++
		if moves%4 == 0 {
			env.kc.ShufflePartitionLeaders()
			return
		}
		p := int32(moves % partitions)
		to := (env.kc.LeaderFor(topic, p) + 1) % 3
		if err := env.kc.MoveTopicPartition(topic, p, to); err != nil {
			t.Errorf("move %s/%d to node %d: %v", topic, p, to, err)
		}
	})
	if moves < 10 {
		t.Fatalf("only %d leader moves during the load", moves)
	}
	if got := sumHighWatermarks(env.kc, topic); got != n {
		t.Fatalf("kfake holds %d records, want %d: the idempotent producer lost or duplicated some", got, n)
	}
	l := c.wait(t, n)
	l.verify(t, n)
	if distinct := dials.check(t, env); distinct < 4 {
		t.Fatalf("dialled %d kproxy listeners, want the bootstrap and all three node ports", distinct)
	}
}

// metadataBrokers asks kproxy's bootstrap for the brokers, as a client
// would, and returns them by node id, failing unless each is at its node
// port.
func metadataBrokers(t testing.TB, env *clusterEnv) map[int32]string {
	t.Helper()
	c := dialRaw(t, env.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	_, resp := clusterRoundTrip(t, c, req, 7)
	got := map[int32]string{}
	for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
		a := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		if a != env.nodeAddr(b.NodeID) {
			t.Fatalf("Metadata names node %d at %s, not its node port %s", b.NodeID, a, env.nodeAddr(b.NodeID))
		}
		got[b.NodeID] = a
	}
	return got
}

// TestClusterAddNode: a broker added to the cluster with a node id kproxy
// serves is reached through its node port: the producer follows
// partitions moved onto it, records produced before and after are all
// consumed, and a new connection to its port is served.
func TestClusterAddNode(t *testing.T) {
	const topic, partitions, n = "growing", 6, 2000
	env := startSpread(t, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dials := &dialLog{}
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produceDuring(ctx, t, prod, topic, 0, n/2, n, nil)
	if _, ok := env.srv.Topology().Addr(3); ok {
		t.Fatal("kproxy knows node 3 before it was added")
	}

	node, port, err := env.kc.AddNode(3, 0)
	if err != nil || node != 3 {
		t.Fatalf("AddNode: node %d, %v", node, err)
	}
	real := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	env.spread(t, topic, partitions, 4) // partitions 3 (and none other) on node 3
	before := env.kc.PartitionInfo(topic, 3).HighWatermark
	produceDuring(ctx, t, prod, topic, n/2, n, n, nil)
	if after := env.kc.PartitionInfo(topic, 3).HighWatermark; after == before {
		t.Fatal("no record reached partition 3, led by the new node 3")
	}
	if got := env.realAddr(t, 3); got != real {
		t.Fatalf("kproxy sends node 3's clients to %s, want %s", got, real)
	}
	dials.mu.Lock()
	reached := false
	for _, a := range dials.addrs {
		reached = reached || a == env.nodeAddr(3)
	}
	dials.mu.Unlock()
	if !reached {
		t.Fatal("the producer never dialled node 3's port")
	}
	if bs := metadataBrokers(t, env); len(bs) != 4 {
		t.Fatalf("Metadata names %d brokers, want 4: %v", len(bs), bs)
	}
	// A new connection to node 3's port is paired with node 3.
	c := dialRaw(t, env.nodeAddr(3))
	if _, err := c.Write(apiVersionsV0(1)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if f, err := readFrame(c); err != nil || corrOf(f) != 1 {
		t.Fatalf("node 3's port did not answer an ApiVersions: %v", err)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	consume(ctx, cons, n).wait(t, n).verify(t, n)
	dials.check(t, env)
}

// TestClusterRemoveNode: a broker leaves the cluster and its partitions
// move to the others; the producer and the consumer carry on through
// kproxy with the brokers left, and no record is lost or duplicated.
func TestClusterRemoveNode(t *testing.T) {
	const topic, partitions, n = "shrinking", 6, 2000
	env := startSpread(t, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dials := &dialLog{}
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	c := consume(ctx, cons, n)
	produceDuring(ctx, t, prod, topic, 0, n/2, n, nil)
	waitFor(t, time.Minute, "the consumer to read the first half", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.l.seen) >= n/2 || c.err != nil
	})

	if err := env.kc.RemoveNode(1); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		if l := env.kc.LeaderFor(topic, p); l == 1 {
			t.Fatalf("partition %d still led by the removed node", p)
		}
	}
	produceDuring(ctx, t, prod, topic, n/2, n, n, nil)
	if got := sumHighWatermarks(env.kc, topic); got != n {
		t.Fatalf("kfake holds %d records, want %d", got, n)
	}
	c.wait(t, n).verify(t, n)
	bs := metadataBrokers(t, env)
	if _, ok := bs[1]; ok || len(bs) != 2 {
		t.Fatalf("Metadata after removing node 1 names %v", bs)
	}
	dials.check(t, env)
}
