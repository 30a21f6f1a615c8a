//go:build linux && nodetest

package node_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestRollingUpdate: an injected application Deployment producing
// idempotently (one record every 20ms, and for 3s more after its
// SIGTERM, as an app flushing on shutdown) is rolled to a new pod
// template and then scaled to zero. Every record an app logged as acknowledged is
// in the log once, and no record is there twice; each pod's kproxy was
// stopped only once its app had closed every connection (native sidecar
// order: the connections' ends come before kproxy's "shutting down" in
// its own log, and it drained 0 connections), with nothing failed in
// flight.
func TestRollingUpdate(t *testing.T) {
	c := nodeCluster(t)
	k := outsideBrokers(t, 3, 0)
	c.startInjector(t)
	ns := c.namespace(t, "rolling", map[string]string{"kproxy.io/inject": "enabled"})
	dep := clientDeployment("rolling", k, "--brokers", "127.0.0.1:9092", "--topic", "rolling", "--count", "0", "--interval", "20ms", "--linger", "3s", "--read=false")
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &one, MaxUnavailable: &zero}}
	c.createInjected(t, ns, dep)

	type followed struct{ name, app, proxy *followedLog }
	var pods []followed
	follow := func(name string) {
		pods = append(pods, followed{app: c.followLog(t, ns, name, "app"), proxy: c.followLog(t, ns, name, "kproxy")})
	}
	readyPod := func(not string) string {
		var name string
		waitFor(t, 3*time.Minute, "a ready rolling pod other than "+not, func() bool {
			for _, p := range c.pods(t, ns, "app=rolling") {
				if p.Name != not && p.DeletionTimestamp == nil && podReady(&p) {
					name = p.Name
					return true
				}
			}
			return false
		})
		return name
	}
	first := readyPod("")
	follow(first)
	waitFor(t, time.Minute, "the first pod's app acknowledged 25 records", func() bool { return pods[0].app.count("acked ") >= 25 })

	// Roll the pod template (what kubectl rollout restart does).
	c.patch(t, "Deployment", ns, "rolling", map[string]any{"spec": map[string]any{"template": map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{"kproxy.test/restarted-at": time.Now().Format(time.RFC3339Nano)}}}}})
	second := readyPod(first)
	follow(second)
	waitFor(t, 2*time.Minute, "the first pod gone", func() bool {
		for _, p := range c.pods(t, ns, "app=rolling") {
			if p.Name == first {
				return false
			}
		}
		return true
	})
	waitFor(t, time.Minute, "the second pod's app acknowledged 25 records", func() bool { return pods[1].app.count("acked ") >= 25 })
	c.patch(t, "Deployment", ns, "rolling", map[string]any{"spec": map[string]any{"replicas": 0}})
	for _, p := range pods {
		p.app.wait(t, 2*time.Minute, "an app container")
		p.proxy.wait(t, 2*time.Minute, "a kproxy container")
	}

	acked := map[string]bool{}
	for i, p := range pods {
		if p.app.count("produced ") != 1 {
			t.Errorf("pod %d's app did not end cleanly:\n%s", i, p.app.String())
		}
		for _, line := range p.app.Lines() {
			if v, ok := strings.CutPrefix(line, "acked "); ok {
				acked[v] = true
			}
		}
		checkSidecarStoppedLast(t, i, p.proxy.Lines())
	}
	held := topicValues(t, k, "rolling", len(acked))
	lost, dup := 0, 0
	for v := range acked {
		if held[v] == 0 {
			lost++
		}
	}
	for _, n := range held {
		if n > 1 {
			dup++
		}
	}
	t.Logf("%d records acknowledged by %d pods, %d in the log; %d lost, %d duplicated", len(acked), len(pods), len(held), lost, dup)
	if lost > 0 || dup > 0 {
		t.Fatalf("%d acknowledged records lost, %d duplicated across the rolling update", lost, dup)
	}
}

// checkSidecarStoppedLast reads a pod's kproxy log: every connection it
// relayed was closed by its client, with nothing failed in flight, before
// kproxy was told to shut down; it then drained no connection.
func checkSidecarStoppedLast(t *testing.T, pod int, lines []string) {
	t.Helper()
	shutdown, closed := -1, 0
	var drained bool
	for i, line := range lines {
		var l struct {
			Message string `json:"message"`
			Reason  string `json:"reason"`
			Failed  int    `json:"failed_in_flight"`
			Conns   *int   `json:"connections"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch l.Message {
		case "shutting down":
			shutdown = i
		case "connection closed":
			closed++
			if shutdown >= 0 {
				t.Errorf("pod %d: kproxy closed a connection after it was told to shut down (the app was still running): %s", pod, line)
			}
			if l.Reason != "client closed" || l.Failed != 0 {
				t.Errorf("pod %d: %s", pod, line)
			}
		case "draining":
			if l.Conns == nil || *l.Conns != 0 {
				t.Errorf("pod %d: kproxy began draining with connections still open: %s", pod, line)
			}
		case "drained":
			drained = true
		}
	}
	if shutdown < 0 || !drained || closed == 0 {
		t.Errorf("pod %d: kproxy's log shows no shutdown, drain or connection (%d closed):\n%s", pod, closed, strings.Join(lines, "\n"))
	}
}

// topicValues reads a topic of k from the start, straight from the
// brokers, until it has at least want distinct values and nothing more
// comes for a second; it counts each value's copies.
func topicValues(t *testing.T, k *kfake.Cluster, topic string, want int) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.ListenAddrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	held := map[string]int{}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { held[string(r.Value)]++; n++ })
		if n == 0 && len(held) >= want {
			break
		}
	}
	return held
}
