package sasl

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
	"github.com/kproxy/kproxy/relay"
)

// ownLink is a driver as the re-authentication test plays it: it notes
// when kproxy's own SaslHandshake is flushed.
type ownLink struct {
	mu   sync.Mutex
	sent bool
	sess *relay.Session
	out  relay.Batch
}

func (l *ownLink) FlushUp(up *relay.Batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range *up {
		if len(f) >= 6 && int16(binary.BigEndian.Uint16(f[4:])) == framing.KeySaslHandshake {
			l.sent = true
		}
	}
	up.Reset()
	return nil
}
func (l *ownLink) Unread() int { return 0 }
func (l *ownLink) WaitStart()  {}
func (l *ownLink) WaitEnd()    {}
func (l *ownLink) Released()   {}
func (l *ownLink) Gone() bool  { return false }
func (l *ownLink) Answer(bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sess.Answers(&l.out)
	return nil
}
func (l *ownLink) ownSent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

// TestReauthConnectionEndIsNotFailing: a re-authentication cut short
// because its connection ended (closed here; a drain or a client leaving
// end it the same way) says nothing about the credentials: the originator
// is not left reporting upstream authentication as failing (which
// /readyz would show, and "works again" would be logged after).
func TestReauthConnectionEndIsNotFailing(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"username": "alice", "password": "pw"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	o, err := New(Config{Upstream: &Upstream{Mechanism: Plain,
		UsernameFile: filepath.Join(dir, "username"), PasswordFile: filepath.Join(dir, "password")}}, NewMetrics(reg), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	prev := Result{Principal: "alice", Lifetime: time.Minute, AuthVersion: 1}
	var rules atomic.Pointer[policy.Engine]
	env := &relay.Env{Framing: framing.Defaults(), Table: correlate.Config{MaxInFlight: 8},
		Metrics: relay.NewMetrics(prometheus.NewRegistry()), Topics: framing.NewTopicIDs(), Policies: &rules,
		Listener: "127.0.0.1:9092", MaxUnread: 1 << 20}
	l := &ownLink{}
	s := relay.New(env, l, zerolog.Nop(), nil)
	l.sess = s
	s.SetReauth(time.Now().Add(-time.Second), func(ctx context.Context, rt relay.RoundTrip) (time.Time, error) {
		_, err := o.Authenticate(ctx, RoundTrip(rt), "broker", &prev)
		return time.Time{}, err
	})
	go func() {
		for !l.ownSent() {
			time.Sleep(5 * time.Millisecond)
		}
		s.Close()
	}()
	var up relay.Batch
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sasl-test")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1)
	if err := s.Request(frame, &up, true); !errors.Is(err, correlate.ErrClosed) {
		t.Fatalf("Request during a re-authentication the close ended: %v, want ErrClosed", err)
	}
	if r := o.Ready(); r != nil {
		t.Fatalf("after a connection closed mid re-authentication the originator reports: %v", r)
	}
	// Nor is it counted failed: a re-authentication on the session's
	// timer can meet a client closing at any moment (an e2e run counted
	// one as a failed authentication).
	if n, c := testutil.ToFloat64(o.m.auths.WithLabelValues(KindReauth, ResultError)), testutil.ToFloat64(o.m.auths.WithLabelValues(KindReauth, ResultCancelled)); n != 0 || c != 1 {
		t.Fatalf("a re-authentication the close ended was counted failed %v, cancelled %v; want 0 and 1", n, c)
	}
}
