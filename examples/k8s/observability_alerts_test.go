package k8s_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// The alerts are checked the way `promtool test rules` checks them: the
// rules file is loaded by Prometheus' own rules manager, series written in
// promqltest's load notation are appended to an in-memory TSDB up to each
// evaluation time, and the group is evaluated at synthetic timestamps, so
// for: and the range functions behave as in a real Prometheus without the
// test waiting.

// alertEvalInterval is kube-prometheus-stack's default evaluationInterval;
// the series below are scraped every 30s too, its default scrape interval.
const alertEvalInterval = 30 * time.Second

// Target labels a PodMonitor scrape adds to every kproxy series; the alerts
// must keep namespace and pod and drop the rest.
const (
	podA = `namespace="kafka", pod="kafka-0", container="kproxy", instance="10.1.0.7:9190", job="kafka/kproxy"`
	podB = `namespace="kafka", pod="kafka-1", container="kproxy", instance="10.1.0.8:9190", job="kafka/kproxy"`
)

// alertScenario is one story told in series: what kproxy's /metrics said
// over time, and which alerts must fire when.
type alertScenario struct {
	alert, name string
	// load is a promqltest load command; its series start at time 0.
	load string
	// from and until bound the evaluations, every alertEvalInterval; from
	// skips the evaluations of a long history no check is about.
	from, until time.Duration
	// quiet: no alert fires at any evaluation.
	quiet bool
	// checks: at these times exactly these alerts fire (none if empty).
	checks []alertCheck
}

type alertCheck struct {
	at     time.Duration
	firing []firingAlert
}

// firingAlert is what an operator receives: every label, the summary as
// rendered, and what the rendered description must say.
type firingAlert struct {
	labels      map[string]string
	summary     string
	description []string
}

// alertScenarios covers every alert of the rules file: its failure firing
// after its for: with the labels and annotations an operator sees, healthy
// input, and the edges (counters reset by a restart, a series that starts
// at 0, a blip shorter than for:) staying quiet.
var alertScenarios = []alertScenario{
	{
		alert: "KproxyNotReady", name: "not ready for 10 minutes",
		// kafka-0 fails /readyz from 10m to 20m; kafka-1 stays ready.
		load: `load 30s
			kproxy_ready{` + podA + `} 1x19 0x19 1x20
			kproxy_ready{` + podB + `} 1x60`,
		until: 30 * time.Minute,
		checks: []alertCheck{
			{at: 14*time.Minute + 30*time.Second}, // pending: for: 5m
			{at: 15 * time.Minute, firing: []firingAlert{{
				labels:      map[string]string{"alertname": "KproxyNotReady", "namespace": "kafka", "pod": "kafka-0", "severity": "critical"},
				summary:     "kproxy in kafka/kafka-0 is not ready",
				description: []string{"/readyz has failed for 5 minutes", "`kubectl logs kafka-0 -c kproxy`"},
			}}},
			{at: 19*time.Minute + 30*time.Second, firing: []firingAlert{{
				labels:  map[string]string{"alertname": "KproxyNotReady", "namespace": "kafka", "pod": "kafka-0", "severity": "critical"},
				summary: "kproxy in kafka/kafka-0 is not ready",
			}}},
			{at: 20 * time.Minute}, // ready again
		},
	},
	{
		alert: "KproxyNotReady", name: "ready, with a 3-minute blip",
		load: `load 30s
			kproxy_ready{` + podA + `} 1x19 0x5 1x40`,
		until: 30 * time.Minute, quiet: true,
	},
	{
		alert: "KproxyUpstreamDialFailures", name: "0.2 failed dials a second",
		load: `load 30s
			kproxy_upstream_dial_failures_total{` + podA + `} 0x20 6+6x80`,
		until: 40 * time.Minute,
		checks: []alertCheck{
			{at: 20 * time.Minute}, // over 0.1/s since ~13m: pending
			{at: 26 * time.Minute, firing: []firingAlert{{
				labels:      map[string]string{"alertname": "KproxyUpstreamDialFailures", "namespace": "kafka", "pod": "kafka-0", "severity": "warning"},
				summary:     "kproxy in kafka/kafka-0 cannot dial its broker",
				description: []string{"0.20 dials per second to the upstream have failed for 10 minutes"},
			}}},
		},
	},
	{
		alert: "KproxyUpstreamDialFailures", name: "a failed dial a minute, old failures",
		load: `load 30s
			kproxy_upstream_dial_failures_total{` + podA + `} 0+0.5x80
			kproxy_upstream_dial_failures_total{` + podB + `} 42x80`,
		until: 40 * time.Minute, quiet: true,
	},
	{
		alert: "KproxyUpstreamDialFailures", name: "counter reset by a restart",
		load: `load 30s
			kproxy_upstream_dial_failures_total{` + podA + `} 500x20 0x60`,
		until: 40 * time.Minute, quiet: true,
	},
	{
		alert: "KproxyOverflowCloses", name: "one client close",
		// Both sides start at 0, as kproxy creates them; one client
		// connection is closed at 10m.
		load: `load 30s
			kproxy_unread_overflow_closes_total{side="client", ` + podA + `} 0x19 1x60
			kproxy_unread_overflow_closes_total{side="upstream", ` + podA + `} 0x80`,
		until: 40 * time.Minute,
		checks: []alertCheck{
			{at: 9*time.Minute + 30*time.Second},
			{at: 10 * time.Minute, firing: []firingAlert{overflowClient}},
			{at: 24 * time.Minute, firing: []firingAlert{overflowClient}}, // the close is in the 15m window
			{at: 25 * time.Minute},                                        // and now out of it
		},
	},
	{
		alert: "KproxyOverflowCloses", name: "a close at the first scrape after start",
		// The pod starts at 5m: its series appear at 0, and the first
		// close is in the next scrape. Without kproxy's 0 the series would
		// appear at 1 and increase() would see nothing.
		load: `load 30s
			kproxy_unread_overflow_closes_total{side="client", ` + podA + `} _x10 0 1x60
			kproxy_unread_overflow_closes_total{side="upstream", ` + podA + `} _x10 0x61`,
		until: 30 * time.Minute,
		checks: []alertCheck{
			{at: 5 * time.Minute},
			{at: 5*time.Minute + 30*time.Second, firing: []firingAlert{overflowClient}},
		},
	},
	{
		alert: "KproxyOverflowCloses", name: "no closes, and old ones reset by a restart",
		load: `load 30s
			kproxy_unread_overflow_closes_total{side="client", ` + podA + `} 3x20 0x60
			kproxy_unread_overflow_closes_total{side="upstream", ` + podA + `} 0x80
			kproxy_unread_overflow_closes_total{side="client", ` + podB + `} 0x80`,
		until: 40 * time.Minute, quiet: true,
	},
	{
		alert: "KproxyAuditLinesDropped", name: "a full disk for a minute",
		// kproxy creates every reason at 0; writes fail from 10m to 11m.
		load: `load 30s
			kproxy_audit_dropped_total{reason="write_failed", ` + podA + `} 0x19 2 4 4x60
			kproxy_audit_dropped_total{reason="queue_full", ` + podA + `} 0x80
			kproxy_audit_dropped_total{reason="closed", ` + podA + `} 0x80`,
		until: 40 * time.Minute,
		checks: []alertCheck{
			{at: 9*time.Minute + 30*time.Second},
			{at: 11 * time.Minute, firing: []firingAlert{{
				labels:      map[string]string{"alertname": "KproxyAuditLinesDropped", "namespace": "kafka", "pod": "kafka-0", "reason": "write_failed", "severity": "warning"},
				summary:     "kproxy in kafka/kafka-0 dropped audit lines (write_failed)",
				description: []string{"audit lines were lost in 15 minutes", "(write_failed:"},
			}}},
			{at: 27 * time.Minute}, // out of the window
		},
	},
	{
		alert: "KproxyAuditLinesDropped", name: "every line written",
		load: `load 30s
			kproxy_audit_dropped_total{reason="write_failed", ` + podA + `} 0x80
			kproxy_audit_dropped_total{reason="queue_full", ` + podB + `} 0x80`,
		until: 40 * time.Minute, quiet: true,
	},
	{
		alert: "KproxyConsumerLagGrowing", name: "a group losing 100 records a minute",
		// Two partitions: one gains 60 records of lag a minute, the other
		// 40; the lag passes 1000 at 10m. The group on orders-audit lags
		// 5000 records all along but keeps pace.
		load: `load 1m
			kproxy_consumer_lag_records{client_id="app", group="billing", topic="orders", partition="0", ` + podA + `} 0+60x60
			kproxy_consumer_lag_records{client_id="app", group="billing", topic="orders", partition="1", ` + podA + `} 0+40x60
			kproxy_consumer_lag_records{client_id="app", group="audit", topic="orders-audit", partition="all", ` + podA + `} 5000x60`,
		until: 50 * time.Minute,
		checks: []alertCheck{
			{at: 24 * time.Minute}, // above 1000 and rising since 10m: pending, for: 15m
			{at: 26 * time.Minute, firing: []firingAlert{{
				labels:      map[string]string{"alertname": "KproxyConsumerLagGrowing", "namespace": "kafka", "pod": "kafka-0", "client_id": "app", "group": "billing", "topic": "orders", "severity": "warning"},
				summary:     "consumer group billing falls behind on orders (kafka/kafka-0)",
				description: []string{"app in group billing gained 1.5k", "more than 1000 records behind"},
			}}},
		},
	},
	{
		alert: "KproxyConsumerLagGrowing", name: "a group that catches up every 10 minutes, and one slightly behind",
		// billing builds 3000 records of lag and drains it every 10
		// minutes; audit rises for an hour but stays under 1000.
		load: `load 1m
			kproxy_consumer_lag_records{client_id="app", group="billing", topic="orders", partition="0", ` + podA + `} 0+300x9 0 0+300x9 0 0+300x9 0 0+300x9 0 0+300x9 0 0+300x9
			kproxy_consumer_lag_records{client_id="app", group="audit", topic="orders", partition="0", ` + podB + `} 0+15x60`,
		until: 60 * time.Minute, quiet: true,
	},
	{
		alert: "KproxySpansDropped", name: "half a span a second dropped",
		load: `load 30s
			kproxy_trace_spans_dropped_total{` + podA + `} 0x10 15+15x80`,
		until: 40 * time.Minute,
		checks: []alertCheck{
			{at: 19 * time.Minute}, // dropping since 5m30s: pending, for: 15m
			{at: 21 * time.Minute, firing: []firingAlert{{
				labels:      map[string]string{"alertname": "KproxySpansDropped", "namespace": "kafka", "pod": "kafka-0", "severity": "info"},
				summary:     "kproxy in kafka/kafka-0 drops spans",
				description: []string{"(0.50 spans/s dropped)"},
			}}},
		},
	},
	{
		alert: "KproxySpansDropped", name: "a 2-minute burst, old drops, a reset",
		load: `load 30s
			kproxy_trace_spans_dropped_total{` + podA + `} 0x10 10+10x3 40x70
			kproxy_trace_spans_dropped_total{` + podB + `} 120x20 0x60`,
		until: 40 * time.Minute, quiet: true,
	},
	{
		alert: "KproxyPolicyRejectionsSpiking", name: "rules jump from 0.2/s to 5/s and from 0 to 2/s",
		// A day at 0.2/s (12 a minute) for deny-admin, then 5/s (300 a
		// minute) from 24h; deny-new, at 0 for a day (kproxy creates the
		// series when it loads the rule), jumps to 2/s at 24h too;
		// throttle-x rejects a steady 3/s all along.
		load: `load 1m
			kproxy_policy_rejected_total{rule="deny-admin", ` + podA + `} 0+12x1440 17580+300x60
			kproxy_policy_rejected_total{rule="deny-new", ` + podA + `} 0x1440 120+120x60
			kproxy_policy_rejected_total{rule="throttle-x", ` + podA + `} 0+180x1500`,
		from: 23 * time.Hour, until: 25 * time.Hour,
		checks: []alertCheck{
			{at: 24*time.Hour + 8*time.Minute}, // pending, for: 10m
			{at: 24*time.Hour + 16*time.Minute, firing: []firingAlert{{
				labels:      map[string]string{"alertname": "KproxyPolicyRejectionsSpiking", "namespace": "kafka", "pod": "kafka-0", "rule": "deny-admin", "severity": "warning"},
				summary:     "kproxy rule deny-admin rejects more than usual in kafka/kafka-0",
				description: []string{"Rule deny-admin rejects 5 requests/s"},
			}, {
				labels:      map[string]string{"alertname": "KproxyPolicyRejectionsSpiking", "namespace": "kafka", "pod": "kafka-0", "rule": "deny-new", "severity": "warning"},
				summary:     "kproxy rule deny-new rejects more than usual in kafka/kafka-0",
				description: []string{"Rule deny-new rejects 2 requests/s"},
			}}},
		},
	},
	{
		alert: "KproxyPolicyRejectionsSpiking", name: "steady rates, a reset, a new pod, under 1/s",
		// kafka-0 rejects 3/s all day and restarts at 23h (its counter
		// starts again at 0); a Deployment's new pod app-2 takes over
		// from app-1 at 23h at the same 3/s (a rollout: a new pod name,
		// no history); unused goes from 0 to 0.5/s.
		load: `load 1m
			kproxy_policy_rejected_total{rule="throttle-x", ` + podA + `} 0+180x1380 0+180x120
			kproxy_policy_rejected_total{rule="throttle-x", namespace="app", pod="app-1", instance="10.2.0.5:9190", job="app/kproxy", container="kproxy"} 0+180x1380
			kproxy_policy_rejected_total{rule="throttle-x", namespace="app", pod="app-2", instance="10.2.0.9:9190", job="app/kproxy", container="kproxy"} _x1380 0+180x120
			kproxy_policy_rejected_total{rule="unused", ` + podA + `} 0x1440 0+30x60`,
		from: 23 * time.Hour, until: 25 * time.Hour, quiet: true,
	},
	{
		alert: "KproxyCertificateExpiringSoon", name: "10 days left",
		// Time 0 is the Unix epoch: the gauge is the expiry as Unix time.
		load: `load 1m
			kproxy_tls_certificate_expiry_timestamp_seconds{side="client", file="/etc/kproxy/tls/tls.crt", ` + podA + `} 864000x150
			kproxy_tls_certificate_expiry_timestamp_seconds{side="upstream", file="/etc/kproxy/upstream/ca.crt", ` + podA + `} 1728000x150`,
		until: 2 * time.Hour,
		checks: []alertCheck{
			{at: 59 * time.Minute}, // pending, for: 1h
			{at: time.Hour, firing: []firingAlert{{
				labels: map[string]string{"alertname": "KproxyCertificateExpiringSoon", "namespace": "kafka", "pod": "kafka-0",
					"side": "client", "file": "/etc/kproxy/tls/tls.crt", "severity": "warning"},
				summary:     "kproxy's client certificate in kafka/kafka-0 expires within 14 days",
				description: []string{"/etc/kproxy/tls/tls.crt expires in 9d 23h 0m 0s."},
			}}},
		},
	},
	{
		alert: "KproxyCertificateExpiringSoon", name: "14 days and 10 minutes left",
		load: `load 1m
			kproxy_tls_certificate_expiry_timestamp_seconds{side="upstream", file="/etc/kproxy/upstream/tls.crt", ` + podA + `} 1210200x150`,
		until: 2 * time.Hour,
		checks: []alertCheck{
			{at: time.Hour + 10*time.Minute}, // under 14 days since 10m30s
			{at: time.Hour + 10*time.Minute + 30*time.Second, firing: []firingAlert{{
				labels: map[string]string{"alertname": "KproxyCertificateExpiringSoon", "namespace": "kafka", "pod": "kafka-0",
					"side": "upstream", "file": "/etc/kproxy/upstream/tls.crt", "severity": "warning"},
				summary:     "kproxy's upstream certificate in kafka/kafka-0 expires within 14 days",
				description: []string{"/etc/kproxy/upstream/tls.crt expires in 13d 22h 59m 30s."},
			}}},
		},
	},
	{
		alert: "KproxyCertificateExpiringSoon", name: "20 days left, and 10 days renewed after 30 minutes",
		load: `load 1m
			kproxy_tls_certificate_expiry_timestamp_seconds{side="client", file="/etc/kproxy/tls/tls.crt", ` + podA + `} 1728000x150
			kproxy_tls_certificate_expiry_timestamp_seconds{side="client", file="/etc/kproxy/tls/tls.crt", ` + podB + `} 864000x30 7776000x120`,
		until: 2 * time.Hour, quiet: true,
	},
	{
		alert: "KproxyOAuthTokenFetchFailing", name: "endpoint down from 5m",
		// Fetches work every 30 s until 5m, then each fails (retried).
		load: `load 30s
			kproxy_oauth_token_fetches_total{result="ok", ` + podA + `} 0+1x10 10x50
			kproxy_oauth_token_fetches_total{result="error", ` + podA + `} 0x10 1+1x50`,
		until: 25 * time.Minute,
		checks: []alertCheck{
			{at: 9 * time.Minute}, // no ok fetch in the window from 10m; pending from then
			{at: 16 * time.Minute, firing: []firingAlert{{
				labels:      map[string]string{"alertname": "KproxyOAuthTokenFetchFailing", "namespace": "kafka", "pod": "kafka-0", "severity": "warning"},
				summary:     "kproxy in kafka/kafka-0 cannot fetch OAuth tokens",
				description: []string{"token requests failed in the last 5", "/readyz names the endpoint's answer"},
			}}},
		},
	},
	{
		alert: "KproxyOAuthTokenFetchFailing", name: "one failure among working fetches",
		load: `load 30s
			kproxy_oauth_token_fetches_total{result="ok", ` + podA + `} 0+1x60
			kproxy_oauth_token_fetches_total{result="error", ` + podA + `} 0x20 1x40`,
		until: 30 * time.Minute, quiet: true,
	},
	{
		alert: "KproxyOAuthTokenExpiring", name: "no successor for a 10-minute token",
		// A token expiring at 10m, fetched at 0; no successor comes.
		load: `load 30s
			kproxy_oauth_token_expiry_timestamp_seconds{` + podA + `} 600x40`,
		until: 20 * time.Minute,
		checks: []alertCheck{
			{at: 8*time.Minute + 30*time.Second}, // 90 s left: pending
			{at: 9*time.Minute + 30*time.Second, firing: []firingAlert{{
				labels:      map[string]string{"alertname": "KproxyOAuthTokenExpiring", "namespace": "kafka", "pod": "kafka-0", "severity": "critical"},
				summary:     "kproxy in kafka/kafka-0 has an OAuth token about to expire with no successor",
				description: []string{"and kproxy has not fetched the next"},
			}}},
		},
	},
	{
		alert: "KproxyOAuthTokenExpiring", name: "tokens renewed at 0.8 of 5 minutes, and a pod without OAuth",
		// Each 5-minute token is followed by the next at 4m.
		load: `load 30s
			kproxy_oauth_token_expiry_timestamp_seconds{` + podA + `} 300x7 540x7 780x7 1020x7 1260x7 1500x7
			kproxy_oauth_token_expiry_timestamp_seconds{` + podB + `} 0x50`,
		until: 22 * time.Minute, quiet: true,
	},
	{
		alert: "KproxySASLAuthenticationFailing", name: "a wrong Secret from 5m",
		// Every series exists at 0 from the start. From 5m each initial
		// authentication fails: clients reconnect, 2 failures a scrape.
		load: `load 30s
			kproxy_sasl_authentications_total{kind="initial", result="ok", ` + podA + `} 0+3x10 30x60
			kproxy_sasl_authentications_total{kind="initial", result="error", ` + podA + `} 0x10 2+2x60
			kproxy_sasl_authentications_total{kind="reauth", result="ok", ` + podA + `} 0x70
			kproxy_sasl_authentications_total{kind="reauth", result="error", ` + podA + `} 0x70`,
		until: 30 * time.Minute,
		checks: []alertCheck{
			{at: 15 * time.Minute}, // pending since 5m30s, for: 10m
			{at: 16 * time.Minute, firing: []firingAlert{{
				labels:      map[string]string{"alertname": "KproxySASLAuthenticationFailing", "namespace": "kafka", "pod": "kafka-0", "kind": "initial", "severity": "warning"},
				summary:     "kproxy in kafka/kafka-0 fails to authenticate to its brokers",
				description: []string{"20 initial SASL authentications failed in the last 5 minutes", "`kubectl logs kafka-0 -c kproxy`"},
			}}},
		},
	},
	{
		alert: "KproxySASLAuthenticationFailing", name: "one failure mid-restart, old failures reset",
		load: `load 30s
			kproxy_sasl_authentications_total{kind="initial", result="ok", ` + podA + `} 0+3x80
			kproxy_sasl_authentications_total{kind="initial", result="error", ` + podA + `} 0x20 1x60
			kproxy_sasl_authentications_total{kind="reauth", result="ok", ` + podA + `} 0+1x80
			kproxy_sasl_authentications_total{kind="reauth", result="error", ` + podA + `} 0x80
			kproxy_sasl_authentications_total{kind="initial", result="error", ` + podB + `} 7x20 0x60`,
		until: 40 * time.Minute, quiet: true,
	},
}

var overflowClient = firingAlert{
	labels:      map[string]string{"alertname": "KproxyOverflowCloses", "namespace": "kafka", "pod": "kafka-0", "side": "client", "severity": "warning"},
	summary:     "kproxy in kafka/kafka-0 closed client connections for max_unread_bytes",
	description: []string{"A client got more than proxy.max_unread_bytes ahead of its peer", "(1 in 15 minutes)"},
}

// TestAlertScenarios runs every scenario through the rules file with
// Prometheus' rules manager and checks the alerts that fire.
func TestAlertScenarios(t *testing.T) {
	file := ruleFileForManager(t)
	for _, sc := range alertScenarios {
		t.Run(sc.alert+"/"+sc.name, func(t *testing.T) { runAlertScenario(t, file, sc) })
	}
}

// TestAlertScenariosCoverEveryAlert fails when an alert of the rules file
// has no scenario that makes it fire and none that keeps it quiet.
func TestAlertScenariosCoverEveryAlert(t *testing.T) {
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, sc := range alertScenarios {
		quiet[sc.alert] = quiet[sc.alert] || sc.quiet
		for _, c := range sc.checks {
			for _, a := range c.firing {
				fires[a.labels["alertname"]] = true
			}
		}
	}
	for _, g := range loadRules(t).Spec.Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("alert %s: no scenario in which it fires (%v) or none in which it stays quiet (%v)", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
}

// ruleFileForManager writes the PrometheusRule's spec as the rule file the
// Operator generates from it, for the rules manager to load.
func ruleFileForManager(t *testing.T) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "kproxy.rules.yaml")
	if err := os.WriteFile(name, ruleGroupsYAML(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func runAlertScenario(t *testing.T, file string, sc alertScenario) {
	ll, err := promqltest.NewLazyLoader(sc.load, promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		t.Fatalf("series: %v", err)
	}
	defer ll.Close()
	ctx := ll.Context()
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(ll.QueryEngine(), ll.Storage()),
		AppendableV2: ll.Storage(),
		Queryable:    ll.Storage(),
		Context:      ctx,
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
	})
	groups, errs := m.LoadGroups(alertEvalInterval, labels.EmptyLabels(), "", nil, false, file)
	if len(errs) > 0 {
		t.Fatalf("the rules manager refuses %s: %v", rulesFile, errs)
	}
	// Restored: there is no earlier state to read back, and it makes
	// the manager write ALERTS as a running Prometheus does.
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true)
			}
		}
	}

	checks := map[time.Duration][]firingAlert{}
	for _, c := range sc.checks {
		if c.at < sc.from || c.at > sc.until || c.at%alertEvalInterval != 0 {
			t.Fatalf("check at %v: not an evaluation time in [%v, %v]", c.at, sc.from, sc.until)
		}
		checks[c.at] = c.firing
	}
	start := time.Unix(0, 0).UTC()
	// The history before from goes in in steps, in time order: the TSDB
	// head refuses samples over an hour older than its newest, and a
	// series that starts late would otherwise go in first at random.
	for at := time.Duration(0); at < sc.from; at += 30 * time.Minute {
		ll.WithSamplesTill(start.Add(at), func(err error) {
			if err != nil {
				t.Fatalf("appending series till %v: %v", at, err)
			}
		})
	}
	for at := sc.from; at <= sc.until; at += alertEvalInterval {
		ts := start.Add(at)
		ll.WithSamplesTill(ts, func(err error) {
			if err != nil {
				t.Fatalf("appending series till %v: %v", at, err)
			}
			for _, g := range groups {
				g.Eval(ctx, ts)
				for _, r := range g.Rules() {
					if err := r.LastError(); err != nil {
						t.Fatalf("at %v: rule %s: %v", at, r.Name(), err)
					}
				}
			}
		})
		got := firingAlerts(groups)
		want, check := checks[at]
		if !check && !sc.quiet {
			continue
		}
		if !compareAlerts(t, at, want, got) {
			return // the evaluations after the first wrong one say the same
		}
	}
}

// firingAlerts returns the alerts of every rule in state firing, sorted.
func firingAlerts(groups map[string]*rules.Group) []*rules.Alert {
	var out []*rules.Alert
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				for _, a := range ar.ActiveAlerts() {
					if a.State == rules.StateFiring {
						out = append(out, a)
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b *rules.Alert) int { return labels.Compare(a.Labels, b.Labels) })
	return out
}

// compareAlerts checks that exactly want fire, and that every annotation
// of what fires rendered: no template error, nothing left unexpanded.
// It says whether all was as wanted.
func compareAlerts(t *testing.T, at time.Duration, want []firingAlert, got []*rules.Alert) bool {
	t.Helper()
	ok := true
	errorf := func(format string, args ...any) {
		t.Helper()
		ok = false
		t.Errorf("at %v: "+format, append([]any{at}, args...)...)
	}
	if len(got) != len(want) {
		errorf("%d alerts firing, want %d:\n%s", len(got), len(want), describeAlerts(got))
		return false
	}
	slices.SortFunc(want, func(a, b firingAlert) int {
		return labels.Compare(labels.FromMap(a.labels), labels.FromMap(b.labels))
	})
	for i, a := range got {
		w, name := want[i], a.Labels.Get("alertname")
		if !maps.Equal(a.Labels.Map(), w.labels) {
			errorf("alert labels %v, want %v", a.Labels, w.labels)
		}
		a.Annotations.Range(func(l labels.Label) {
			for _, bad := range []string{"<error expanding template", "<no value>", "{{", "}}", "$labels", "$value"} {
				if strings.Contains(l.Value, bad) {
					errorf("%s: annotation %s did not render (%q): %s", name, l.Name, bad, l.Value)
				}
			}
		})
		if s := a.Annotations.Get("summary"); s != w.summary {
			errorf("%s: summary %q, want %q", name, s, w.summary)
		}
		d := a.Annotations.Get("description")
		for _, part := range w.description {
			if !strings.Contains(d, part) {
				errorf("%s: description %q does not say %q", name, d, part)
			}
		}
	}
	return ok
}

func describeAlerts(as []*rules.Alert) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, "  %v value %g active since %v\n    %v\n", a.Labels, a.Value, a.ActiveAt.Sub(time.Unix(0, 0)), a.Annotations)
	}
	if len(as) == 0 {
		b.WriteString("  (none)\n")
	}
	return b.String()
}
