package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestClusterSaslBootstrap: a cluster whose listener requires SASL closes
// kproxy's own Metadata (kproxy does not authenticate). kproxy says so
// once, is ready (the bootstrap answers; the brokers come with the
// clients' responses), and an authenticating client is served on the node
// ports. kproxy used to report "not ready" until some client had
// fetched metadata through it, which an application that connects lazily
// never does while its pod is not ready, and warned on every retry.
func TestClusterSaslBootstrap(t *testing.T) {
	env := startCluster(t, 3, 7, []kfake.Opt{kfake.SeedTopics(6, "spread"), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "admin", "secret")})
	waitFor(t, 20*time.Second, "kproxy ready with no client yet", func() bool {
		return env.srv.Ready(context.Background()) == nil
	})
	if n := env.srv.Topology().Nodes(); n != 0 {
		t.Fatalf("%d brokers known before any client: the discovery was not refused, the test proves nothing", n)
	}
	// The warning is written just after the outcome is recorded.
	waitFor(t, 20*time.Second, "a log line saying the bootstrap requires SASL", func() bool {
		return strings.Contains(env.logs.String(), "requires SASL")
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dials := &dialLog{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(dials), kgo.DefaultProduceTopic("spread"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.SASL(plain.Auth{User: "admin", Pass: "secret"}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 60; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: keyOf(i), Value: valueOf(i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	warned := 0
	for _, line := range strings.Split(env.logs.String(), "\n") {
		if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "requires SASL") {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("warned %d times that the bootstrap requires SASL, want once", warned)
	}
	if distinct := dials.check(t, env); distinct < 2 {
		t.Fatalf("dialled %d kproxy listeners, want the bootstrap and node ports", distinct)
	}
}
