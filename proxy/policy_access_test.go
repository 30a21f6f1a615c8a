package proxy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/policy"
)

// denySecret refuses every produce that names a "secret*" topic.
var denySecret = policy.Rule{Name: "no-secret", Action: policy.ActionReject,
	Match: policy.Selector{APIs: []string{"Produce"}, Topics: []string{"secret*"}}}

// A topic access rule must look to franz-go like a broker ACL: the record
// fails with TOPIC_AUTHORIZATION_FAILED (not retried, not a dead
// connection) and the same client goes on producing elsewhere.
func TestPolicyDeniedTopicFranzGo(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "secret", "public")})
	ps := applyPolicies(t, env, denySecret)
	via := &onlyVia{addr: env.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(via))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to a denied topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "public", Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("produce to an allowed topic after a refusal: %v", err)
	}
	via.check(t)
	if n := ps.count(t, "kproxy_policy_rejected_total", "no-secret"); n < 1 {
		t.Fatalf("rejected counter = %v, want at least 1", n)
	}
}

// The same refusal as sarama sees it: SendMessage returns
// ErrTopicAuthorizationFailed and the producer stays usable.
func TestPolicyDeniedTopicSarama(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "secret", "public")})
	applyPolicies(t, env, denySecret)
	d := &viaDialer{want: env.addr}
	cfg := saramaConfig(d)
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 1
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	prod, err := sarama.NewSyncProducer([]string{env.addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	_, _, err = prod.SendMessage(&sarama.ProducerMessage{Topic: "secret", Value: sarama.StringEncoder("x")})
	if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Fatalf("produce to a denied topic: %v, want ErrTopicAuthorizationFailed", err)
	}
	if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "public", Value: sarama.StringEncoder("y")}); err != nil {
		t.Fatalf("produce to an allowed topic after a refusal: %v", err)
	}
	d.check(t)
}

// A denied admin API is answered in-band: kadm gets a per-topic
// authorization error, and the client keeps using the connections it has
// (a refusal that cost a reconnect would show in kproxy_connections_total).
func TestPolicyDeniedAPIKeepsConnection(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "keep")})
	applyPolicies(t, env, policy.Rule{Name: "no-deletes", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"DeleteTopics"}}})
	via := &onlyVia{addr: env.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.WithHooks(via), kgo.DefaultProduceTopic("keep"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Warm up every connection the client uses: metadata, controller
	// (CreateTopics goes where DeleteTopics will) and produce.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "scratch"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := env.accepted()

	resps, err := adm.DeleteTopics(ctx, "keep", "scratch")
	if err != nil {
		t.Fatalf("DeleteTopics failed as a request instead of per topic: %v", err)
	}
	for _, topic := range []string{"keep", "scratch"} {
		r, ok := resps[topic]
		if !ok {
			t.Fatalf("no result for %q in %+v", topic, resps)
		}
		if !errors.Is(r.Err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("DeleteTopics %q: %v, want TOPIC_AUTHORIZATION_FAILED", topic, r.Err)
		}
	}
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatalf("ListTopics after the refusal: %v", err)
	}
	if !td.Has("keep") || !td.Has("scratch") {
		t.Fatalf("a refused delete reached the broker: topics now %v", td.Names())
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the refusal: %v", err)
	}
	if after := env.accepted(); after != before {
		t.Fatalf("kproxy_connections_total went from %v to %v: the refusal cost a reconnect", before, after)
	}
	if env.requests("DeleteTopics") == 0 {
		t.Fatal("DeleteTopics did not go through kproxy")
	}
	if env.logs.contains("policy:") {
		t.Fatalf("a connection was closed by policy:\n%s", env.logs)
	}
	via.check(t)
}

// An acks=0 produce gets no response, so a refusal cannot be said in-band:
// kproxy closes the connection, as a broker does, and logs the rule.
func TestPolicyAcksZeroRefusalCloses(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "t")})
	ps := applyPolicies(t, env, policy.Rule{Name: "no-produce", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"Produce"}}})
	c := dialRaw(t, env.addr)
	if _, err := c.Write(encodeRequest(produceRequest(9, 0, "t"), 1)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c, 10*time.Second)
	waitFor(t, 10*time.Second, "the close logged with its rule", func() bool {
		return env.logs.contains("policy") && env.logs.contains("no-produce")
	})
	// The rule's close is counted after the closing line is logged.
	waitFor(t, 10*time.Second, "the close counted for its rule", func() bool {
		return ps.count(t, "kproxy_policy_closed_total", "no-produce") >= 1
	})
	if n := ps.count(t, "kproxy_policy_closed_total", "no-produce"); n != 1 {
		t.Fatalf("closed counter = %v, want 1", n)
	}
}

// One produce that names a denied and an allowed topic is split, as a
// broker's ACLs would treat it: the denied topic's partitions get
// TOPIC_AUTHORIZATION_FAILED and the allowed topic's records are written
// by that same request, without a retry.
func TestPolicyDeniedTopicInMixedProduce(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "secret", "public")})
	applyPolicies(t, env, denySecret)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Manual flushing: both records wait in the client until Flush, which
	// sends every batch that is ready in one request, however the
	// scheduler spaces the two Produce calls.
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.ManualFlushing(),
		kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(rs ...*kgo.Record) map[*kgo.Record]error {
		var mu sync.Mutex
		errs := make(map[*kgo.Record]error)
		var wg sync.WaitGroup
		for _, r := range rs {
			wg.Add(1)
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				errs[r] = err
				mu.Unlock()
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		return errs
	}
	// Warm the metadata of both topics, so both records share one request.
	warm := &kgo.Record{Topic: "public", Value: []byte("warm")}
	if err := produce(warm, &kgo.Record{Topic: "secret", Value: []byte("warm")})[warm]; err != nil {
		t.Fatal(err)
	}
	before := env.requests("Produce")
	secret := &kgo.Record{Topic: "secret", Value: []byte("s")}
	public := &kgo.Record{Topic: "public", Value: []byte("p")}
	errs := produce(secret, public)
	if !errors.Is(errs[secret], kerr.TopicAuthorizationFailed) {
		t.Errorf("denied topic: %v, want TOPIC_AUTHORIZATION_FAILED", errs[secret])
	}
	if errs[public] != nil {
		t.Errorf("allowed topic in the same request: %v", errs[public])
	}
	if n := env.requests("Produce") - before; n != 1 {
		t.Fatalf("%v produce requests for the two records, want 1 (no retry)", n)
	}
}
