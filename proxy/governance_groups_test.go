package proxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/policy"
)

// consumerStandards is the consumer rule.
func consumerStandards(action string) policy.Rule {
	return policy.Rule{Name: "consumer-standards", Action: action,
		Match: policy.Selector{APIs: []string{"JoinGroup", "ConsumerGroupHeartbeat"}},
		Require: &policy.Require{GroupID: "team-*",
			SessionTimeoutMs: &policy.Range{Min: i64(10000), Max: i64(60000)}}}
}

// groupJoinError starts a franz-go group consumer and returns the first
// group error it reports, nil once it has joined and been assigned.
func groupJoinError(t *testing.T, env *testEnv, group string, opts ...kgo.Opt) error {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(env.addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics("team-events"),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)
	assigned := make(chan struct{}, 1)
	opts = append(opts, kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
		select {
		case assigned <- struct{}{}:
		default:
		}
	}))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		select {
		case <-assigned:
			return nil
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		for _, e := range fs.Errors() {
			var ge *kgo.ErrGroupSession
			if errors.As(e.Err, &ge) {
				return ge.Err
			}
		}
	}
	t.Fatalf("group %s: neither joined nor refused in 20s", group)
	return nil
}

// group_id with franz-go's group consumer (whichever protocol it speaks
// to kfake), session_timeout_ms with sarama's (classic JoinGroup).
func TestGovernanceGroups(t *testing.T) {
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(1, "team-events")})
	ps := applyPolicies(t, env, consumerStandards(policy.ActionReject))

	if err := groupJoinError(t, env, "rogue"); !errors.Is(err, kerr.InvalidGroupID) {
		t.Errorf("group rogue: %v, want INVALID_GROUP_ID", err)
	}
	if err := groupJoinError(t, env, "team-ok", kgo.SessionTimeout(30*time.Second)); err != nil {
		t.Errorf("group team-ok: %v, want joined", err)
	}

	for _, c := range []struct {
		timeout time.Duration
		want    error
	}{{5 * time.Minute, sarama.ErrInvalidSessionTimeout}, {30 * time.Second, nil}} {
		cfg := saramaConfig(&viaDialer{want: env.addr})
		cfg.Consumer.Group.Session.Timeout = c.timeout
		cfg.Consumer.Group.Rebalance.Timeout = 10 * time.Second
		g, err := sarama.NewConsumerGroup([]string{env.addr}, "team-sarama-"+c.timeout.String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		h := &joinedHandler{joined: make(chan struct{}, 1)}
		errc := make(chan error, 1)
		go func() { errc <- g.Consume(ctx, []string{"team-events"}, h) }()
		select {
		case err = <-errc:
		case <-h.joined:
			err = nil
		case <-ctx.Done():
			err = ctx.Err()
		}
		cancel()
		g.Close()
		if !errors.Is(err, c.want) && err != c.want {
			t.Errorf("sarama session timeout %s: %v, want %v", c.timeout, err, c.want)
		}
	}
	if got := violations(t, ps, "consumer-standards", "session_timeout_ms"); got < 1 {
		t.Errorf("violations{session_timeout_ms} = %v", got)
	}
	if got := violations(t, ps, "consumer-standards", "group_id"); got < 1 {
		t.Errorf("violations{group_id} = %v", got)
	}

	// Log-only: the rogue group joins, and is counted.
	ps.reload(t, env, consumerStandards(policy.ActionLog))
	before := violations(t, ps, "consumer-standards", "group_id")
	if err := groupJoinError(t, env, "rogue-2"); err != nil {
		t.Errorf("log-only rule refused group rogue-2: %v", err)
	}
	if got := violations(t, ps, "consumer-standards", "group_id"); got <= before {
		t.Errorf("log-only violation not counted: %v", got)
	}
}

// joinedHandler signals once a sarama group session is set up.
type joinedHandler struct{ joined chan struct{} }

func (h *joinedHandler) Setup(sarama.ConsumerGroupSession) error {
	select {
	case h.joined <- struct{}{}:
	default:
	}
	return nil
}
func (h *joinedHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *joinedHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	<-s.Context().Done()
	return nil
}
