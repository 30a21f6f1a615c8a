package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/syncbuf"
)

// testConn is the connection every test line comes from.
var testConn = Conn{Client: "10.0.0.5:53412", Principal: "spiffe://cluster.local/ns/orders/sa/admin", UpstreamPrincipal: "svc-orders", ClientID: "orders-admin"}

// harness is a Log writing to a buffer, with its counters.
type harness struct {
	t   *testing.T
	log *Log
	buf *syncbuf.Buffer
	m   *Metrics
}

func newHarness(t *testing.T, c Config) *harness {
	t.Helper()
	c.Enabled = true
	buf := &syncbuf.Buffer{}
	m := NewMetrics(prometheus.NewRegistry())
	l := newLog(c, m, Env{Pod: "kproxy-0", Namespace: "kafka"}, buf, nil)
	l.now = func() time.Time { return time.Date(2026, 12, 3, 10, 0, 0, 123e6, time.UTC) }
	t.Cleanup(func() { l.Close() })
	return &harness{t: t, log: l, buf: buf, m: m}
}

// lines closes the log (writing what is queued) and parses every line.
func (h *harness) lines() []map[string]any {
	h.t.Helper()
	if err := h.log.Close(); err != nil {
		h.t.Fatalf("Close: %v", err)
	}
	return parseLines(h.t, h.buf.String())
}

// one is lines, for a test that wrote exactly one.
func (h *harness) one() map[string]any {
	h.t.Helper()
	ls := h.lines()
	if len(ls) != 1 {
		h.t.Fatalf("%d lines, want 1:\n%s", len(ls), h.buf.String())
	}
	return ls[0]
}

func parseLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var ls []map[string]any
	for _, s := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(s))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("line %q: %v", s, err)
		}
		ls = append(ls, m)
	}
	return ls
}

// resources is a line's resources list.
func resources(t *testing.T, ln map[string]any) []map[string]any {
	t.Helper()
	raw, _ := ln["resources"].([]any)
	out := make([]map[string]any, len(raw))
	for i, r := range raw {
		out[i] = r.(map[string]any)
	}
	return out
}

// field is ln[k] as a string ("" when absent); numbers come as their text.
func field(ln map[string]any, k string) string {
	switch v := ln[k].(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// wantFields checks several fields of one JSON object at once.
func wantFields(t *testing.T, what string, obj map[string]any, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := field(obj, k); got != v {
			t.Errorf("%s: %s = %q, want %q (object %v)", what, k, got, v, obj)
		}
	}
}

// wire encodes req at version and decodes it again, as the relay sees it.
func wire[R kmsg.Request](t *testing.T, req R, version int16) R {
	t.Helper()
	req.SetVersion(version)
	b := req.AppendTo(nil)
	out := kmsg.RequestForKey(req.Key())
	out.SetVersion(version)
	if err := out.ReadFrom(b); err != nil {
		t.Fatalf("decoding %T v%d: %v", req, version, err)
	}
	return out.(R)
}

// wireResp is wire for a response.
func wireResp[R kmsg.Response](t *testing.T, resp R, version int16) R {
	t.Helper()
	resp.SetVersion(version)
	b := resp.AppendTo(nil)
	out := kmsg.ResponseForKey(resp.Key())
	out.SetVersion(version)
	if err := out.ReadFrom(b); err != nil {
		t.Fatalf("decoding %T v%d: %v", resp, version, err)
	}
	return out.(R)
}

func ptr[T any](v T) *T { return &v }

// notIn fails if secret appears anywhere in out.
func notIn(t *testing.T, out []byte, secret string) {
	t.Helper()
	if bytes.Contains(out, []byte(secret)) {
		t.Errorf("%q appears in the audit output:\n%s", secret, out)
	}
}
