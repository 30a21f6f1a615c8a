package main

import (
	"strings"
	"testing"
	"time"
)

// TestValidateGood checks a valid file exits 0 and says ok.
func TestValidateGood(t *testing.T) {
	r := kproxy(t, 10*time.Second, "validate", "--config", "testdata/good.yaml")
	if r.code != 0 || r.stdout != "testdata/good.yaml: ok\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestValidateExample keeps examples/kproxy.yaml valid as the config grows.
func TestValidateExample(t *testing.T) {
	r := kproxy(t, 10*time.Second, "validate", "--config", "../../examples/kproxy.yaml")
	if r.code != 0 || !strings.HasSuffix(r.stdout, ": ok\n") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestValidateBad checks an invalid file fails and stderr points at the
// file, line and field, which is all an operator needs to fix it.
func TestValidateBad(t *testing.T) {
	r := kproxy(t, 10*time.Second, "validate", "--config", "testdata/bad.yaml")
	want := "testdata/bad.yaml:5: correlate.max_in_flight: must be between"
	if r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr %q, want it to contain %q", r.code, r.stderr, want)
	}
}

// TestValidateUnknownField checks a typo in the file is caught with its
// line, not ignored.
func TestValidateUnknownField(t *testing.T) {
	path := t.TempDir() + "/typo.yaml"
	writeFile(t, path, "proxy:\n  upstream: b:9092\n  listn: 127.0.0.1:1\n")
	r := kproxy(t, 10*time.Second, "validate", "--config", path)
	if r.code == 0 || !strings.Contains(r.stderr, path+":3: ") || !strings.Contains(r.stderr, "listn") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestValidateNeedsConfig checks validate without a file says what it
// needs instead of validating the defaults.
func TestValidateNeedsConfig(t *testing.T) {
	r := kproxy(t, 10*time.Second, "validate")
	if r.code == 0 || !strings.Contains(r.stderr, "--config") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestValidateCluster checks the cluster section is checked against the
// other ports, and a good one is summed up for the operator.
func TestValidateCluster(t *testing.T) {
	dir := t.TempDir()
	good := dir + "/good.yaml"
	writeFile(t, good, "proxy:\n  upstream: kafka:9092\ncluster:\n  node_port_base: 9100\n  node_ids: {min: 1, max: 3}\n")
	r := kproxy(t, 10*time.Second, "validate", "--config", good)
	if r.code != 0 || !strings.Contains(r.stdout, "node ids 1-3 on ports 9100-9102, advertised as 127.0.0.1") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	bad := dir + "/bad.yaml"
	writeFile(t, bad, "proxy:\n  upstream: kafka:9092\nadmin:\n  listen: 127.0.0.1:9101\ncluster:\n  node_port_base: 9100\n")
	r = kproxy(t, 10*time.Second, "validate", "--config", bad)
	if r.code == 0 || !strings.Contains(r.stderr, bad+":6: cluster.node_port_base: node ports 9100-9199 include admin.listen's port 9101") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestRunRefusesMissingCredentials: kproxy does not start with a
// sasl.upstream whose files are missing, and says which, never what.
func TestRunRefusesMissingCredentials(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/username", "alice")
	cfg := dir + "/k.yaml"
	writeFile(t, cfg, "proxy:\n  listen: 127.0.0.1:0\n  upstream: 127.0.0.1:1\nadmin:\n  listen: \"\"\nsasl:\n  upstream:\n    mechanism: PLAIN\n"+
		"    username_file: "+dir+"/username\n    password_file: "+dir+"/password\n")
	r := kproxy(t, 20*time.Second, "run", "--config", cfg)
	if r.code == 0 || !strings.Contains(r.stderr, "password_file") || strings.Contains(r.stderr, "alice") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestValidateGovernanceWarning checks a require.configs name that is no
// Kafka topic config is a warning (the file is still valid), naming it.
func TestValidateGovernanceWarning(t *testing.T) {
	path := t.TempDir() + "/gov.yaml"
	writeFile(t, path, "proxy:\n  upstream: b:9092\npolicies:\n  rules:\n    - name: t\n      match: {apis: [CreateTopics]}\n"+
		"      action: reject\n      require:\n        configs:\n          retension.ms: {min: 1}\n")
	r := kproxy(t, 10*time.Second, "validate", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "warning: policies.rules.0.require.configs.retension.ms") || !strings.HasSuffix(r.stdout, ": ok\n") {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
