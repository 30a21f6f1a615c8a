package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// testVersion is stamped into the test binary, so `kproxy version` can be
// checked against a known value.
const testVersion = "v9.9.9-test"

// bin is the kproxy binary built once by TestMain. The tests run it as a
// user would, so flags, exit codes and output streams are what is tested.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kproxy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kproxy tests: temp dir:", err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "kproxy")
	build := exec.Command("go", "build", "-ldflags", "-X main.buildVersion="+testVersion, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "kproxy tests: building the kproxy binary failed: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished kproxy invocation.
type result struct {
	stdout, stderr string
	code           int
}

// kproxy runs the binary with args and waits up to timeout for it to exit.
func kproxy(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("kproxy %q did not exit within %v\nstdout:\n%s\nstderr:\n%s", args, timeout, &stdout, &stderr)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("kproxy %q: %v", args, err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}
