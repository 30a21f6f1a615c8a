//go:build unix

package audit

import (
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
)

// Standard output whose reader has gone: the lines fail and are counted,
// and the process is not killed by SIGPIPE, as it would be writing to
// fd 1 itself.
func TestStdoutClosedPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := unix.Dup(1)
	if err != nil {
		t.Skip("cannot dup stdout:", err)
	}
	if err := unix.Dup2(int(w.Fd()), 1); err != nil {
		t.Fatal(err)
	}
	c := Defaults()
	c.Enabled = true
	m := NewMetrics(prometheus.NewRegistry())
	l, err := Open(c, m, Env{})
	if err := unix.Dup2(saved, 1); err != nil { // restore before anything can fail
		panic(err)
	}
	unix.Close(saved)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close() // nobody will ever read: writes meet EPIPE
	settleMany(t, l, 5)
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := testutil.ToFloat64(m.dropped.WithLabelValues(dropWriteFailed)); got != 5 {
		t.Errorf("dropped{write_failed} = %v, want 5", got)
	}
}
