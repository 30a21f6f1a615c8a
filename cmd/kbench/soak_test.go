package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kproxy/kproxy/internal/embedded"
	"github.com/kproxy/kproxy/policy"
)

// TestSoakThroughKproxy runs a few seconds of the soak's load against a
// kfake broker through an in-process kproxy with the soak's rate rule,
// sampling this process as the soak samples kproxy's. Every kind of load
// must make progress with no errors, and the rule must throttle.
func TestSoakThroughKproxy(t *testing.T) {
	broker, err := embedded.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	srv := testKproxyServer(t, broker.Addr())
	srv.SetPolicies(policy.New(policy.Config{Rules: []policy.Rule{{
		Name:   "soak-hot-producer",
		Match:  policy.Selector{APIs: []string{"Produce"}, ClientID: hotClientID},
		Limits: policy.Limits{RequestsPerSecond: 5},
		Action: policy.ActionThrottle,
	}}}, policy.NewMetrics(prometheus.NewRegistry())))
	addr := srv.Addr().String()
	cluster, err := broker.Start(addr, kfake.SeedTopics(4, "kbench-soak"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	admin := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer admin.Close()

	cfg := soakConfig{
		Bootstrap: addr, Topic: "kbench-soak", Partitions: 4,
		Duration: 8 * time.Second, Interval: time.Second, Size: 100,
		Producers: 2, ProduceRate: 20, HotRate: 30, Fetchers: 2, FetchRate: 20,
		Members: 2, CommitEvery: 200 * time.Millisecond, Rejoin: 3 * time.Second,
		Churn: 4, ChurnHold: 300 * time.Millisecond,
		PID: os.Getpid(), Admin: strings.TrimPrefix(admin.URL, "http://"),
	}
	var csvOut, progress bytes.Buffer
	res, err := runSoak(context.Background(), cfg, &csvOut, &progress)
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range soakKinds {
		tally := res.Kinds[k]
		if tally.Errors > 0 {
			t.Errorf("%s: %d errors, the last: %v", k, tally.Errors, tally.LastErr)
		}
		if tally.Ops == 0 {
			t.Errorf("%s: no progress", k)
		}
	}
	if res.Throttles == 0 {
		t.Error("the rate rule throttled nothing")
	}
	s, err := readSoakCSV(&csvOut)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s["elapsed_s"]); n != res.Samples || n < 3 {
		t.Fatalf("%d CSV rows for %d samples, want them equal and at least 3", n, res.Samples)
	}
	for i := range res.Samples {
		if s["rss_mib"][i] <= 0 || s["goroutines"][i] <= 0 || s["fds"][i] <= 0 {
			t.Errorf("row %d: rss %v MiB, %v goroutines, %v fds; want all sampled", i, s["rss_mib"][i], s["goroutines"][i], s["fds"][i])
		}
	}
}

func TestSoakConfigChecked(t *testing.T) {
	good := soakConfig{Bootstrap: "127.0.0.1:1", Duration: time.Second, Interval: time.Second,
		Producers: 1, ProduceRate: 1, Churn: 1, ChurnHold: time.Second}
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*soakConfig){
		"no bootstrap":  func(c *soakConfig) { c.Bootstrap = "" },
		"no rate":       func(c *soakConfig) { c.ProduceRate = 0 },
		"no hold":       func(c *soakConfig) { c.ChurnHold = 0 },
		"pid, no admin": func(c *soakConfig) { c.PID = 1 },
		"zero interval": func(c *soakConfig) { c.Interval = 0 },
	} {
		c := good
		mod(&c)
		if err := c.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
