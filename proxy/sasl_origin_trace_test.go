package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"

	"github.com/kproxy/kproxy/sasl"
	"github.com/kproxy/kproxy/tracing"
)

// TestSaslOriginTracingAndSecrets: every request span carries the
// principal kproxy authenticated as, and no secret appears in any span,
// log line or metric over a whole run: PLAIN (whose token is the
// password) with renewals, a client trying its own SASL with a password
// of its own, and credentials the broker refuses.
func TestSaslOriginTracingAndSecrets(t *testing.T) {
	const (
		topic       = "traced"
		wrong       = "Wr0ng-but-still-s3cret"
		clientOwned = "m4llory-pw"
	)
	tr, flush := newTestTracer(t, nil)
	env := startOriginWith(t, sasl.Plain, rightPassword, []kfake.Opt{kfake.SeedTopics(2, topic),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1500"})}, originSetup{tr: tr})
	runUntilRenewed(t, env, topic, 2)

	c := dialRaw(t, env.addr)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 2, []byte("\x00mallory\x00"+clientOwned)
	roundTripKmsg(t, c, auth, 5)
	c.Close()

	writeSecret(t, env.dir, "password", wrong) // the broker refuses these
	refused := dialRaw(t, env.addr)
	refused.Write(apiVersionsV0(1))
	expectClosed(t, refused, 10*time.Second)
	waitFor(t, 10*time.Second, "the refusal counted", func() bool { return env.auths("initial", "error") >= 1 })

	secrets := []string{rightPassword, wrong, clientOwned}
	spans := flush()
	traced := 0
	for _, s := range spans {
		a := attrMap(s)
		if _, isRequest := a["kproxy.correlation_id.client"]; isRequest {
			traced++
			if got := a[tracing.UpstreamPrincipalKey].Emit(); got != "alice" {
				t.Errorf("span %q: %s = %q, want alice", s.Name, tracing.UpstreamPrincipalKey, got)
			}
		}
		kvs := append([]attribute.KeyValue(nil), s.Attributes...)
		for _, ev := range s.Events {
			kvs = append(kvs, ev.Attributes...)
		}
		texts := []string{s.Name, s.Status.Description}
		for _, kv := range kvs {
			texts = append(texts, string(kv.Key), kv.Value.Emit())
		}
		for _, text := range texts {
			for _, secret := range secrets {
				if strings.Contains(text, secret) {
					t.Fatalf("span %q carries a secret: %q", s.Name, text)
				}
			}
		}
	}
	if traced < 10 {
		t.Fatalf("%d request spans of %d", traced, len(spans))
	}

	if !env.logs.contains("upstream authentication failed") || !env.saslLogs.contains("upstream SASL authenticated") {
		t.Fatalf("the run's logs miss the authentications:\n%s\n%s", env.logs, env.saslLogs)
	}
	for _, logs := range []*logBuffer{env.logs, env.saslLogs} {
		for _, line := range strings.Split(logs.String(), "\n") {
			for _, secret := range secrets {
				if strings.Contains(line, secret) {
					t.Fatalf("a log line carries a secret: %s", line)
				}
			}
		}
	}
	for _, reg := range []*prometheus.Registry{env.testEnv.reg, env.reg} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					for _, secret := range secrets {
						if strings.Contains(l.GetValue(), secret) {
							t.Fatalf("metric %s has a secret in label %s", mf.GetName(), l.GetName())
						}
					}
				}
			}
		}
	}
}
