package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/syncbuf"
)

// TestRunNeedsUpstream checks run refuses to start without a broker and
// names the setting to add.
func TestRunNeedsUpstream(t *testing.T) {
	r := kproxy(t, 10*time.Second, "run", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, "proxy.upstream") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestRunReadyAndSIGTERM checks the life of a deployed kproxy: it becomes
// ready once its upstream is reachable, and SIGTERM stops it cleanly with
// exit 0, as an orchestrator expects.
func TestRunReadyAndSIGTERM(t *testing.T) {
	upstream := fakeUpstream(t)
	adminAddr := freeAddr(t)
	var out lockedBuffer
	cmd := exec.Command(bin, "run", "--upstream", upstream, "--listen", "127.0.0.1:0", "--admin", adminAddr)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})

	c := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := c.Get("http://" + adminAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 within 15s (last: %v)\noutput:\n%s", err, out.String())
		}
		select {
		case <-exited:
			t.Fatalf("kproxy exited before ready: %v\noutput:\n%s", waitErr, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("after SIGTERM: %v\noutput:\n%s", waitErr, out.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("kproxy still running 5s after SIGTERM\noutput:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "kproxy stopped") {
		t.Errorf("no \"kproxy stopped\" in the log:\n%s", out.String())
	}
}

// fakeUpstream is a TCP listener standing in for the broker: readiness
// only needs the upstream to accept connections.
func fakeUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// freeAddr returns a loopback address that was free a moment ago, so the
// test knows the admin port before kproxy binds it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer = syncbuf.Buffer

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
