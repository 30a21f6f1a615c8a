package proxy

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// onlyVia fails the test if the client dials anything but kproxy.
type onlyVia struct {
	addr string
	mu   sync.Mutex
	bad  []string
}

func (o *onlyVia) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, c net.Conn, err error) {
	if err != nil || c == nil {
		return
	}
	if got := c.RemoteAddr().String(); got != o.addr {
		o.mu.Lock()
		o.bad = append(o.bad, got)
		o.mu.Unlock()
	}
}

func (o *onlyVia) check(t testing.TB) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.bad) > 0 {
		t.Fatalf("client bypassed kproxy: dialled %v", o.bad)
	}
}

func TestFranzGoProduceConsumeGroup(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(4, "franz")})
	via := &onlyVia{addr: env.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(via),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("franz"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var wg sync.WaitGroup
	var perr error
	var pmu sync.Mutex
	for i := 0; i < recordCount; i++ {
		wg.Add(1)
		prod.Produce(ctx, &kgo.Record{Key: keyOf(i), Value: valueOf(i)}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				pmu.Lock()
				perr = errors.Join(perr, err)
				pmu.Unlock()
			}
		})
	}
	wg.Wait()
	if perr != nil {
		t.Fatalf("produce: %v", perr)
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(via),
		kgo.ConsumerGroup("franz-group"), kgo.ConsumeTopics("franz"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	l := newLedger()
	for len(l.seen) < recordCount {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume after %d records: %v", len(l.seen), err)
		}
		fs.EachRecord(func(r *kgo.Record) { l.add(r.Key, r.Value) })
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	l.verify(t, recordCount)
	via.check(t)
	if env.requests("Produce") == 0 || env.requests("Fetch") == 0 || env.requests("JoinGroup") == 0 ||
		env.requests("OffsetCommit") == 0 {
		t.Fatalf("kproxy did not see the client's Produce/Fetch/JoinGroup/OffsetCommit requests")
	}
}

func TestFranzGoTransactions(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(2, "txn")})
	via := &onlyVia{addr: env.addr}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(via),
		kgo.TransactionalID("kproxy-txn"), kgo.DefaultProduceTopic("txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	commit := func(from, to int, end kgo.TransactionEndTry) {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Key: keyOf(i), Value: valueOf(i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := prod.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	commit(0, 50, kgo.TryCommit)
	commit(1000, 1050, kgo.TryAbort) // must stay invisible to read_committed
	commit(50, 100, kgo.TryCommit)

	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(via), kgo.ConsumeTopics("txn"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	l := newLedger()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) || len(l.seen) < 100 {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cons.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 100 committed records", len(l.seen))
		}
		fs.EachRecord(func(r *kgo.Record) { l.add(r.Key, r.Value) })
	}
	l.verify(t, 100)
	via.check(t)
	if env.requests("EndTxn") < 3 || env.requests("InitProducerId") == 0 {
		t.Fatalf("transaction APIs did not go through kproxy")
	}
}

func TestFranzGoAdminTopics(t *testing.T) {
	env := startKfake(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "admin-a"); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, "admin-a")
	if err != nil || len(td["admin-a"].Partitions) != 3 {
		t.Fatalf("describe after create: %v %v", td, err)
	}
	if _, err := adm.DeleteTopics(ctx, "admin-a"); err != nil {
		t.Fatal(err)
	}
	td, err = adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name := range td {
		if strings.HasPrefix(name, "admin-a") {
			t.Fatalf("topic still listed after delete")
		}
	}
	if env.requests("CreateTopics") == 0 || env.requests("DeleteTopics") == 0 {
		t.Fatal("admin requests did not go through kproxy")
	}
}
