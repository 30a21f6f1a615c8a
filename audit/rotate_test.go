package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitFor polls cond until it holds or the deadline passes; the poll is
// how the test waits for the writer and the rotation library's cleanup,
// never what it asserts.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A file output rotates at max_file_bytes (whole MiB) and keeps max_files
// old files, deleting older ones; every line stays whole in one file.
func TestRotationKeepsMaxFiles(t *testing.T) {
	dir := t.TempDir()
	c := Defaults()
	c.Enabled, c.Output, c.MaxFileBytes, c.MaxFiles = true, filepath.Join(dir, "audit.log"), 1<<20, 2
	m := NewMetrics(prometheus.NewRegistry())
	l, err := Open(c, m, Env{Pod: "p"})
	if err != nil {
		t.Fatal(err)
	}
	// About 64 KiB a line: 100 topics with a 500-byte config value each.
	req := kmsg.NewPtrCreateTopicsRequest()
	for i := range 100 {
		req.Topics = append(req.Topics, kmsg.CreateTopicsRequestTopic{Topic: "topic-" + itoa(int32(i)), NumPartitions: 1, ReplicationFactor: 3,
			Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "x.value", Value: ptr(strings.Repeat("v", 500))}}})
	}
	const perFile, files = 20, 6 // 20 lines overfill 1 MiB: 6 rotations
	written := 0
	for range files {
		for range perFile {
			l.Begin(testConn, req.Key(), 4, req).Unknown()
		}
		written += perFile
		// One batch written before the next, so rotations fall in
		// different milliseconds (backups are named to the millisecond).
		waitFor(t, "the batch to be written", func() bool { return testutil.ToFloat64(m.lines) == float64(written) })
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	backups := func() []string {
		all, _ := filepath.Glob(filepath.Join(dir, "audit-*.log"))
		return all
	}
	waitFor(t, "old files beyond max_files to be deleted", func() bool { return len(backups()) <= c.MaxFiles })
	kept := append(backups(), c.Output)
	if len(kept) != c.MaxFiles+1 {
		t.Fatalf("files %v, want %d backups and the current file", kept, c.MaxFiles)
	}
	for _, f := range kept {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 1<<20 {
			t.Errorf("%s is %d bytes, over max_file_bytes", f, len(b))
		}
		ls := parseLines(t, string(b))
		if len(ls) == 0 {
			t.Errorf("%s holds no line", f)
		}
	}
	if info, err := os.Stat(c.Output); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("audit file mode %v (%v), want 0600: it names who changed what", info.Mode(), err)
	}
}
