package proxy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/sasl"
)

// TestSaslOriginCluster: in cluster mode with every broker requiring
// SASL, kproxy's own discovery authenticates, so the brokers are known
// and kproxy ready before any client; a client with no SASL settings then
// round-trips records through the node ports.
func TestSaslOriginCluster(t *testing.T) {
	const topic = "spread"
	dir := t.TempDir()
	writeSecret(t, dir, "username", "alice")
	writeSecret(t, dir, "password", rightPassword)
	reg := prometheus.NewRegistry()
	sm := sasl.NewMetrics(reg)
	orig, err := sasl.New(sasl.Config{Upstream: &sasl.Upstream{Mechanism: sasl.ScramSHA512,
		UsernameFile: filepath.Join(dir, "username"), PasswordFile: filepath.Join(dir, "password")}}, sm, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, topic), kfake.EnableSASL(),
		kfake.Superuser(sasl.ScramSHA512, "alice", rightPassword))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	env := startClusterProxy(t, kc.ListenAddrs()[0], 7, nil, func(s *Server) { s.SetSasl(orig) })
	env.kc = kc
	// The discovery loop counts a discovery after the brokers it learnt
	// are known, so readiness can come a moment before the count.
	waitFor(t, 20*time.Second, "kproxy ready and a discovery counted ok, with no client yet", func() bool {
		return env.srv.Ready(context.Background()) == nil && testutil.ToFloat64(env.m.Discoveries.WithLabelValues("ok")) >= 1
	})
	if n := env.srv.Topology().Nodes(); n != 3 {
		t.Fatalf("%d brokers known before any client, want 3 (the discovery authenticates)", n)
	}
	if strings.Contains(env.logs.String(), "requires SASL") {
		t.Fatalf("kproxy says the bootstrap requires SASL while authenticating itself:\n%s", env.logs)
	}
	env.spread(t, topic, 6, 3)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dials := &dialLog{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 120
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: keyOf(i), Value: valueOf(i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	l := newLedger()
	for len(l.seen) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d: %v", len(l.seen), n, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { l.add(r.Key, r.Value) })
	}
	l.verify(t, n)
	if distinct := dials.check(t, env); distinct < 4 {
		t.Fatalf("dialled %d kproxy listeners, want the bootstrap and the three node ports", distinct)
	}
	ok, failed := saslAuths(reg, "initial", "ok"), saslAuths(reg, "initial", "error")
	if ok < 4 || failed != 0 { // the discoveries and the client's connections
		t.Fatalf("authentications: %v ok, %v failed", ok, failed)
	}
}
