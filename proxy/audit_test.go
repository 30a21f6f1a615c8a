package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/audit"
	"github.com/kproxy/kproxy/policy"
)

// auditLine is what a test reads of an audit line.
type auditLine struct {
	API       string `json:"api"`
	ClientID  string `json:"client_id"`
	Client    string `json:"client"`
	Outcome   string `json:"outcome"`
	Rule      string `json:"rule"`
	Resources []struct {
		Type    string             `json:"type"`
		Name    string             `json:"name"`
		Configs map[string]*string `json:"configs"`
		Outcome string             `json:"outcome"`
		Rule    string             `json:"rule"`
		Message string             `json:"message"`
	} `json:"resources"`
}

// startAudited runs kproxy in front of kfake with the audit log writing
// to output, and returns the log's registry.
func startAudited(t *testing.T, output string, kopts ...kfake.Opt) (*testEnv, *prometheus.Registry, *audit.Log) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := audit.Defaults()
	c.Enabled, c.Output = true, output
	l, err := audit.Open(c, audit.NewMetrics(reg), audit.Env{Pod: "app-0", Namespace: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	env := startKfakeWith(t, kopts, func(s *Server) { s.SetAudit(l) }, nil)
	return env, reg, l
}

// readAudit waits for n lines in path and parses them.
func readAudit(t *testing.T, path string, n int) []auditLine {
	t.Helper()
	var lines []auditLine
	waitFor(t, 10*time.Second, "audit lines", func() bool {
		f, err := os.Open(path)
		if err != nil {
			return false
		}
		defer f.Close()
		lines = lines[:0]
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var l auditLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("audit line %q: %v", sc.Text(), err)
			}
			lines = append(lines, l)
		}
		return len(lines) >= n
	})
	return lines
}

// One line per change, with the broker's outcome per resource and the
// rule's for what kproxy refused; produces are not audited, refusals of
// them are; sensitive config values are redacted.
func TestAuditChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	env, _, _ := startAudited(t, path, kfake.SeedTopics(1, "doomed", "orders.x"))
	applyPolicies(t, env, topicStandards(policy.ActionReject), producerStandards(policy.ActionReject))
	adm, ctx := kadmClient(t, env)

	day := "86400000"
	if _, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": &day}, "team-a.ok", "bad"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopics(ctx, "doomed", "never-was"); err != nil {
		t.Fatal(err)
	}
	secret := "hunter2-very-secret"
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "listener.name.internal.ssl.key.password", Value: &secret}}); err != nil {
		t.Fatal(err)
	}
	// A produce within the rules is not audited; one it refuses is.
	if err := franzProduce(t, env, &kgo.Record{Topic: "orders.x", Key: []byte("k"), Value: okValue, Headers: goodHeaders}); err != nil {
		t.Fatal(err)
	}
	if err := franzProduce(t, env, &kgo.Record{Topic: "orders.x", Value: okValue, Headers: goodHeaders}); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless produce: %v", err)
	}

	lines := readAudit(t, path, 4)
	byAPI := map[string]auditLine{}
	for _, l := range lines {
		if l.API == "Produce" && l.Outcome == "" {
			t.Errorf("produce line without outcome: %+v", l)
		}
		byAPI[l.API] = l
	}
	if len(lines) != 4 {
		t.Fatalf("%d audit lines, want 4 (CreateTopics, DeleteTopics, IncrementalAlterConfigs, the refused Produce): %+v", len(lines), lines)
	}
	ct := byAPI["CreateTopics"]
	outcomes := map[string]string{}
	for _, r := range ct.Resources {
		outcomes[r.Name] = r.Outcome + "/" + r.Rule
	}
	if ct.Outcome != "partial" || outcomes["team-a.ok"] != "NONE/" || outcomes["bad"] != "POLICY_VIOLATION/topic-standards" || ct.ClientID != "gov-admin" || ct.Client == "" {
		t.Errorf("CreateTopics line %+v, outcomes %v", ct, outcomes)
	}
	for _, r := range ct.Resources {
		if r.Name == "team-a.ok" && (r.Configs["retention.ms"] == nil || *r.Configs["retention.ms"] != day) {
			t.Errorf("CreateTopics line lacks the config set: %+v", r)
		}
	}
	// The line matches what the broker did.
	if !topicExists(t, adm, ctx, "team-a.ok") || topicExists(t, adm, ctx, "bad") {
		t.Error("the broker's topics do not match the audit line")
	}
	dt := byAPI["DeleteTopics"]
	got := map[string]string{}
	for _, r := range dt.Resources {
		got[r.Name] = r.Outcome
	}
	if got["doomed"] != "NONE" || got["never-was"] != "UNKNOWN_TOPIC_OR_PARTITION" || topicExists(t, adm, ctx, "doomed") {
		t.Errorf("DeleteTopics line %+v", dt)
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), secret) {
		t.Fatalf("the audit log holds a password:\n%s", raw)
	}
	if p := byAPI["Produce"]; len(p.Resources) != 1 || p.Resources[0].Outcome != "INVALID_RECORD" || p.Resources[0].Rule != "producer-standards" ||
		p.Resources[0].Name != "orders.x" { // named by id in Produce v13: the line has the name kproxy learnt
		t.Errorf("refused produce line %+v", p)
	}
	if strings.Contains(string(raw), string(okValue[:20])) {
		t.Fatal("the audit log holds record contents")
	}
}

// A connection closed before the broker answered still writes its line,
// with outcome unknown.
func TestAuditUnknownOnClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	env, _, _ := startAudited(t, path)
	release := make(chan struct{})
	defer close(release)
	env.cluster.ControlKey(int16(kmsg.DeleteTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
		env.cluster.KeepControl()
		<-release
		return nil, nil, false
	})
	c := dialRaw(t, env.addr)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TopicNames, req.TimeoutMillis = 4, []string{"held"}, 5000
	if _, err := c.Write(encodeRequest(req, 1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the delete in flight", func() bool { return env.requests("DeleteTopics") >= 1 })
	c.Close()
	lines := readAudit(t, path, 1)
	if lines[0].API != "DeleteTopics" || lines[0].Outcome != "unknown" || len(lines[0].Resources) != 1 || lines[0].Resources[0].Outcome != "unknown" {
		t.Fatalf("line %+v, want DeleteTopics with outcome unknown", lines[0])
	}
}

// An audit output that fails (a full disk) or never drains (a FIFO no
// one reads) costs clients nothing: requests go on, lines are dropped
// and counted.
func TestAuditOutputFaultsDoNotStall(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{"/dev/full", fifo} {
		t.Run(filepath.Base(out), func(t *testing.T) {
			env, reg, _ := startAudited(t, out)
			adm, ctx := kadmClient(t, env)
			deadline, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			const n = 300
			for i := 0; i < n; i++ {
				if _, err := adm.DeleteTopics(deadline, "nope"); err != nil {
					t.Fatalf("request %d with a stuck audit output: %v", i, err)
				}
			}
			if out == "/dev/full" {
				waitFor(t, 10*time.Second, "drops counted", func() bool {
					return metricValue(t, reg, "kproxy_audit_dropped_total", map[string]string{"reason": "write_failed"}) >= 1
				})
			}
			if got := metricValue(t, reg, "kproxy_audit_lines_total", nil); got != 0 {
				t.Errorf("%v lines counted written to %s", got, out)
			}
		})
	}
}
