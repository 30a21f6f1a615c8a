package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoCheck runs the one-command proof that kproxy relays real Kafka
// traffic: produce and consume through it against the embedded broker.
func TestDemoCheck(t *testing.T) {
	r := kproxy(t, 60*time.Second, "demo", "--check", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	if r.code != 0 || !strings.Contains(r.stdout, "demo check passed") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestDemoLoadPrintsSpans runs the tour: demo --load with no OTLP endpoint
// prints a span line per request its producer and consumer group make,
// a Fetch line linking to a Produce line (the traceparent kproxy injected
// into the produced records), reports records going both ways, and stops
// promptly on SIGTERM.
func TestDemoLoadPrintsSpans(t *testing.T) {
	var out lockedBuffer
	cmd := exec.Command(bin, "demo", "--load", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })

	progress := regexp.MustCompile(`demo load: (\d+) records produced, (\d+) consumed`)
	deadline := time.After(30 * time.Second)
	for {
		s := out.String()
		if m := progress.FindStringSubmatch(s); m != nil && m[2] != "0" &&
			strings.Contains(s, " span  Produce demo ") && strings.Contains(s, " span  Fetch demo ") &&
			strings.Contains(s, "client=demo-producer") && strings.Contains(s, "group=demo-group") && fetchLinksProduce(s) {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("demo exited: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("no Produce and Fetch span lines, Fetch linked to Produce, and consumed records within 30s:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("demo still running 10s after SIGTERM:\n%s", out.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("demo took %v to stop; its own clients should stop before the drain", d)
	}
}

var (
	produceID = regexp.MustCompile(` span  Produce demo .* id=(\S+)`)
	fetchLink = regexp.MustCompile(` span  Fetch demo .* links=(\S+)`)
)

// fetchLinksProduce reports whether a Fetch span line links to the id of
// a Produce span line.
func fetchLinksProduce(out string) bool {
	produced := map[string]bool{}
	for _, m := range produceID.FindAllStringSubmatch(out, -1) {
		produced[m[1]] = true
	}
	for _, m := range fetchLink.FindAllStringSubmatch(out, -1) {
		for _, id := range strings.Split(m[1], ",") {
			if produced[id] {
				return true
			}
		}
	}
	return false
}
