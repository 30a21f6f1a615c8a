package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A running kproxy picks up new policies when its config file changes and
// on SIGHUP, and refuses an invalid file while keeping the rules in force:
// what a Kubernetes ConfigMap update relies on.
func TestRunReloadsPolicies(t *testing.T) {
	upstream := fakeUpstream(t)
	adminAddr := freeAddr(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "kproxy.yaml")
	write := func(body string) {
		t.Helper()
		// Like a ConfigMap volume: write aside, then swap in.
		tmp := filepath.Join(dir, "next.yaml")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	base := "proxy:\n  upstream: " + upstream + "\n  listen: 127.0.0.1:0\nadmin:\n  listen: " + adminAddr + "\n"
	write(base)
	var out lockedBuffer
	cmd := exec.Command(bin, "run", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	metrics := func() string {
		resp, err := http.Get("http://" + adminAddr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\noutput:\n%s", what, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The reload counter's series exist once the watcher is in place.
	waitFor("admin up and the config watcher in place", func() bool {
		return strings.Contains(metrics(), `kproxy_config_reloads_total{result="ok"} 0`)
	})

	write(base + "policies:\n  rules:\n    - name: no-deletes\n      match: {apis: [DeleteTopics]}\n      action: reject\n")
	waitFor("reload after the file changed", func() bool {
		return strings.Contains(metrics(), `kproxy_config_reloads_total{result="ok"} 1`)
	})

	write(base + "policies:\n  rules:\n    - name: bad\n      action: explode\n")
	waitFor("invalid file refused", func() bool {
		return strings.Contains(metrics(), `kproxy_config_reloads_total{result="invalid"} 1`)
	})
	// The log line goes through a pipe and may reach out a moment after
	// the counter is scraped: wait for it too.
	waitFor("a log line saying why the file was refused", func() bool {
		return strings.Contains(out.String(), "new config refused") && strings.Contains(out.String(), "policies.rules.0.action")
	})

	write(base)
	waitFor("reload back to no rules", func() bool {
		return strings.Contains(metrics(), `kproxy_config_reloads_total{result="ok"} 2`)
	})
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("reload on SIGHUP", func() bool {
		return strings.Contains(metrics(), `kproxy_config_reloads_total{result="ok"} 3`)
	})
}
