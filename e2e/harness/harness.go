// Package harness holds what the end-to-end tests share: finding the
// repository, building kproxy, picking free loopback ports, and starting
// external processes (kproxy, Jaeger, later real Kafka brokers) that are
// always killed when the test ends.
//
// A test package that uses it must call Main from its TestMain.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// workDir is a directory for the whole test binary (built binaries), made
// by Main and removed when the tests end.
var workDir string

// Main runs the tests of a package with a work directory for the helpers
// that build once per test binary. Call it from TestMain:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "kproxy-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// WorkDir is a new folder under the test binary's work directory, kept
// until the tests end: for what outlives one test, such as a driver made
// once and used by the tests of every broker version.
func WorkDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp(mustWorkDir(t), name+"-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustWorkDir(t testing.TB) string {
	t.Helper()
	if workDir == "" {
		t.Fatal("harness.Main was not called: add `func TestMain(m *testing.M) { harness.Main(m) }` to the test package")
	}
	return workDir
}

const (
	e2eModule  = "github.com/kproxy/kproxy/e2e"
	mainModule = "github.com/kproxy/kproxy"
)

// E2EDir is the root of the e2e module (the directory of its go.mod),
// found by walking up from the working directory of the test.
func E2EDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == e2eModule {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod of module %s above the working directory", e2eModule)
		}
		dir = parent
	}
}

// RepoRoot is the root of the kproxy module: the parent of the e2e module.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root := filepath.Dir(E2EDir(t))
	if got := modulePath(filepath.Join(root, "go.mod")); got != mainModule {
		t.Fatalf("%s/go.mod is module %q, want %q: the e2e module must sit inside the kproxy repository", root, got, mainModule)
	}
	return root
}

// modulePath reads the module line of a go.mod, or "" if there is none.
func modulePath(gomod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago and that no earlier call in this process returned: the
// kernel hands a port just released out again, and a kproxy's admin port
// once came back as the Kafka fixture's kproxy port ("address already in
// use"). Another process may still take one before it is used, so
// starters retry with new ports when their process fails to come up.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for len(ports) < n {
		if len(ls) > n+1000 {
			t.Fatalf("picking %d free ports: every port offered was handed out before", n)
		}
		// Each listener stays open until the end, so the kernel offers a
		// new port on every turn.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("picking a free port: %v", err)
		}
		ls = append(ls, l)
		if port := l.Addr().(*net.TCPAddr).Port; handOut(port) {
			ports = append(ports, port)
		}
	}
	return ports
}

// handedOut holds every port FreePorts has returned in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// handOut records port as returned, and reports false if it was already.
func handOut(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	handedOut.ports[port] = true
	return true
}

// Env is this process's environment without the variables that would
// change what a started process does behind the test's back (OTEL_*, and
// the E2E_* variables the Jaeger config reads), plus extra ("K=V").
func Env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") || strings.HasPrefix(kv, "E2E_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// errExited is returned by waitHTTP when the process died first.
var errExited = fmt.Errorf("process exited")

// waitHTTP polls url until it answers 200, p exits, or timeout passes.
func waitHTTP(p *Proc, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%w before %s answered: %v", errExited, url, p.ExitErr())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v (last: %s)", url, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FreePortRange returns n consecutive TCP ports that were free on
// 127.0.0.1 a moment ago and that FreePorts has not handed out, for a
// process that binds a block (kproxy's node ports). The block is picked
// below the kernel's ephemeral range (32768 up on Linux), where the
// outgoing connections of the tests take no port.
func FreePortRange(t testing.TB, n int) int {
	t.Helper()
	const low, high = 20000, 32000
	for attempt := 0; attempt < 200; attempt++ {
		base := low + mathrand.IntN(high-low-n)
		if ok := claimRange(base, n); ok {
			return base
		}
	}
	t.Fatalf("found no %d consecutive free ports between %d and %d", n, low, high)
	return 0
}

// claimRange binds base..base+n-1 to check they are free and, when all
// are, records them as handed out.
func claimRange(base, n int) bool {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for p := base; p < base+n; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		ls = append(ls, l)
	}
	handedOut.Lock()
	defer handedOut.Unlock()
	for p := base; p < base+n; p++ {
		if handedOut.ports[p] {
			return false
		}
	}
	for p := base; p < base+n; p++ {
		handedOut.ports[p] = true
	}
	return true
}
