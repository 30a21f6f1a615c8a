package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReadyMetric checks kproxy_ready follows the readiness check at each
// scrape, both ways, next to the registry's own metrics.
func TestReadyMetric(t *testing.T) {
	var down atomic.Bool
	ready := func(context.Context) error {
		if down.Load() {
			return errors.New("draining")
		}
		return nil
	}
	base := startServer(t, Config{Listen: "127.0.0.1:0"}, ready)
	for _, step := range []struct {
		down bool
		want string
	}{{false, "kproxy_ready 1\n"}, {true, "kproxy_ready 0\n"}, {false, "kproxy_ready 1\n"}} {
		down.Store(step.down)
		code, body := get(t, base+"/metrics")
		if code != http.StatusOK || !strings.Contains(body, step.want) || !strings.Contains(body, "kproxy_test_events_total 3") {
			t.Errorf("not ready=%v: /metrics = %d, want %q and the registry's counter:\n%s", step.down, code, step.want, body)
		}
	}
}
