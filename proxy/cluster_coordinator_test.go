package proxy

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// verifyRange fails unless l holds exactly the records from..to-1.
func verifyRange(t testing.TB, l *ledger, from, to int) {
	t.Helper()
	if l.dups > 0 {
		t.Errorf("%d records consumed more than once", l.dups)
	}
	if len(l.seen) != to-from {
		t.Errorf("consumed %d records, want %d (%d-%d)", len(l.seen), to-from, from, to-1)
	}
	for i := from; i < to; i++ {
		if _, ok := l.seen[string(keyOf(i))]; !ok {
			t.Fatalf("record %d (%s) not consumed", i, keyOf(i))
		}
	}
}

// TestClusterCoordinatorMoves: a consumer group commits through its
// coordinator's node port; the coordinators then move (kfake rehashes
// them), the old one answers NOT_COORDINATOR, and the client finds the
// new one through kproxy, goes on consuming only new records, and commits
// there. Its committed offsets, read back through kproxy, cover every
// record.
func TestClusterCoordinatorMoves(t *testing.T) {
	const topic, group, partitions, n = "coordinated", "moving-group", 6, 600
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
	cons, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()

	produceDuring(ctx, t, prod, topic, 0, n, n, nil)
	verifyRange(t, consume(ctx, cons, n).wait(t, n), 0, n)
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit through the first coordinator: %v", err)
	}
	first := env.kc.CoordinatorFor(group)
	finds := env.requests("FindCoordinator")
	for i := 0; env.kc.CoordinatorFor(group) == first; i++ {
		if i == 100 {
			t.Fatalf("the coordinator of %s stayed on node %d through 100 rehashes", group, first)
		}
		env.kc.RehashCoordinators()
	}
	second := env.kc.CoordinatorFor(group)

	produceDuring(ctx, t, prod, topic, n, 2*n, n, nil)
	verifyRange(t, consume(ctx, cons, n).wait(t, n), n, 2*n)
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit after the coordinator moved from node %d to %d: %v", first, second, err)
	}
	if env.requests("FindCoordinator") == finds {
		t.Fatal("the client never asked for the new coordinator")
	}

	adm := kadm.NewClient(cons)
	offsets, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch the group's offsets: %v", err)
	}
	var committed int64
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Errorf("offset of %s/%d: %v", o.Topic, o.Partition, o.Err)
		}
		committed += o.At
	})
	if committed != 2*n {
		t.Fatalf("the group committed %d records' worth of offsets on node %d, want %d", committed, second, 2*n)
	}
	dials.check(t, env)
}

// TestClusterFindCoordinator: FindCoordinator answers at every version,
// for groups coordinated by each broker, name the coordinator's node port:
// v0-3 at top level, v4+ in the coordinators array.
func TestClusterFindCoordinator(t *testing.T) {
	env := startCluster(t, 3, 7, nil)
	groups := map[int32]string{} // coordinator node: a group it coordinates
	for i := 0; len(groups) < 3; i++ {
		if i == 1000 {
			t.Fatalf("no group coordinated by each of 3 brokers among 1000: %v", groups)
		}
		g := fmt.Sprintf("group-%d", i)
		if node := env.kc.CoordinatorFor(g); groups[node] == "" {
			groups[node] = g
		}
	}
	c := dialRaw(t, env.addr)
	corr := int32(100)
	for v := int16(0); v <= 3; v++ {
		for node, g := range groups {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorKey = v, g
			corr++
			_, resp := clusterRoundTrip(t, c, req, corr)
			r := resp.(*kmsg.FindCoordinatorResponse)
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				t.Fatalf("FindCoordinator v%d for %s: %v", v, g, err)
			}
			if got := hostPort(r.Host, r.Port); r.NodeID != node || got != env.nodeAddr(node) {
				t.Fatalf("FindCoordinator v%d for %s: node %d at %s, want node %d at %s", v, g, r.NodeID, got, node, env.nodeAddr(node))
			}
		}
	}
	for v := int16(4); v <= 6; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		for _, g := range groups {
			req.CoordinatorKeys = append(req.CoordinatorKeys, g)
		}
		corr++
		_, resp := clusterRoundTrip(t, c, req, corr)
		r := resp.(*kmsg.FindCoordinatorResponse)
		if len(r.Coordinators) != len(groups) {
			t.Fatalf("FindCoordinator v%d: %d coordinators, want %d", v, len(r.Coordinators), len(groups))
		}
		for _, co := range r.Coordinators {
			if err := kerr.ErrorForCode(co.ErrorCode); err != nil {
				t.Fatalf("FindCoordinator v%d for %s: %v", v, co.Key, err)
			}
			want := env.kc.CoordinatorFor(co.Key)
			if got := hostPort(co.Host, co.Port); co.NodeID != want || got != env.nodeAddr(want) {
				t.Fatalf("FindCoordinator v%d for %s: node %d at %s, want node %d at %s", v, co.Key, co.NodeID, got, want, env.nodeAddr(want))
			}
		}
	}
}

// TestClusterCoordinatorMovesSarama: sarama dials the address a
// FindCoordinator answer names (franz-go dials the node id it knows from
// Metadata), so a sarama group shows that the coordinator's address it is
// given, before and after the coordinators move, is kproxy's node port.
// The second session resumes from the offsets committed through the first
// coordinator and reads only the new records.
func TestClusterCoordinatorMovesSarama(t *testing.T) {
	const topic, group, partitions, n = "coordinated-sarama", "moving-sarama-group", 6, 600
	env := startSpread(t, topic, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	dials := &addrDialer{}
	cfg := saramaConfig(nil)
	cfg.Net.Proxy.Dialer = dials
	cl, err := sarama.NewClient([]string{env.addr}, cfg)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer cl.Close()

	produceDuring(ctx, t, prod, topic, 0, n, n, nil)
	verifyRange(t, saramaConsumeAll(ctx, t, cl, group, topic, n), 0, n)
	first := env.kc.CoordinatorFor(group)
	for i := 0; env.kc.CoordinatorFor(group) == first; i++ {
		if i == 100 {
			t.Fatalf("the coordinator of %s stayed on node %d through 100 rehashes", group, first)
		}
		env.kc.RehashCoordinators()
	}
	second := env.kc.CoordinatorFor(group)
	produceDuring(ctx, t, prod, topic, n, 2*n, n, nil)
	verifyRange(t, saramaConsumeAll(ctx, t, cl, group, topic, n), n, 2*n)
	co, err := cl.Coordinator(group)
	if err != nil {
		t.Fatal(err)
	}
	if co.ID() != second || co.Addr() != env.nodeAddr(second) {
		t.Fatalf("sarama's coordinator is node %d at %s, want node %d at %s", co.ID(), co.Addr(), second, env.nodeAddr(second))
	}
	dials.check(t, env)
}
