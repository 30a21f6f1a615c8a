package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
)

// handshakeReauth is a re-authentication that sends one SaslHandshake.
func handshakeReauth(ctx context.Context, rt RoundTrip) (time.Time, error) {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, "PLAIN"
	_, err := rt(ctx, req)
	return time.Time{}, err
}

// ownSent reports whether kproxy's own SaslHandshake has been flushed.
func (l *link) ownSent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.flushed {
		for _, f := range b {
			if len(f) >= 6 && int16(binary.BigEndian.Uint16(f[4:])) == framing.KeySaslHandshake {
				return true
			}
		}
	}
	return false
}

// TestReauthClosedMidway: a pair closed while kproxy waits for the answer
// to its own re-authentication request fails no client request: the
// in-flight gauge stays at what the client's requests left (0), nothing
// is counted failed, and Close says no request failed. kproxy's own entry
// used to be counted as a client's, taking the process-wide gauge below
// zero for good.
func TestReauthClosedMidway(t *testing.T) {
	s, l := newSession(t, 8)
	s.SetReauth(time.Now().Add(-time.Second), handshakeReauth)
	closed := make(chan int, 1)
	go func() {
		for !l.ownSent() {
			time.Sleep(5 * time.Millisecond)
		}
		closed <- s.Close()
	}()
	var up Batch
	err := s.Request(request(kmsg.NewPtrApiVersionsRequest(), 1), &up, true)
	if !errors.Is(err, correlate.ErrClosed) {
		t.Fatalf("Request during a re-authentication the close ended: %v, want ErrClosed", err)
	}
	if n := <-closed; n != 0 {
		t.Errorf("Close counted %d failed requests; the client had none in flight", n)
	}
	s.CountRequests()
	if g := testutil.ToFloat64(s.env.Metrics.InFlight); g != 0 {
		t.Errorf("in-flight gauge %v after the close, want 0", g)
	}
	if f := testutil.ToFloat64(s.env.Metrics.Failed); f != 0 {
		t.Errorf("%v requests counted failed, want 0", f)
	}
}

// fetch is a Fetch request frame asking a 500ms wait.
func fetch(corr int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.ReplicaID = 12, 500, -1
	return request(req, corr)
}

// sentFetchWait is the max_wait_ms of the Fetch frame f as kproxy sent it.
func sentFetchWait(t *testing.T, f []byte) int32 {
	t.Helper()
	h, err := framing.ParseRequestHeader(f)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = h.APIVersion
	if err := req.ReadFrom(f[h.BodyOffset:]); err != nil {
		t.Fatal(err)
	}
	return req.MaxWaitMillis
}

// TestReauthShortensHeldFetch: a Fetch that waited for a re-authentication
// goes to the broker with that wait taken off its max_wait_ms, so it is
// answered when its client expects (kafka-go gave such connections up: it
// times a Fetch out at its MaxWait, having asked the broker for a quarter
// less); the next Fetch, not held, keeps its wait.
func TestReauthShortensHeldFetch(t *testing.T) {
	s, l := newSession(t, 8)
	const hold = 200 * time.Millisecond
	s.SetReauth(time.Now().Add(-time.Second), func(ctx context.Context, rt RoundTrip) (time.Time, error) {
		time.Sleep(hold) // a slow broker's SaslHandshake and SaslAuthenticate
		return time.Time{}, nil
	})
	var up Batch
	if err := s.Request(fetch(1), &up, true); err != nil {
		t.Fatal(err)
	}
	if len(up) != 1 {
		t.Fatalf("%d frames batched, want the Fetch", len(up))
	}
	if w := sentFetchWait(t, up[0]); w > 500-int32(hold.Milliseconds()) || w < 0 {
		t.Fatalf("the held Fetch was sent with max_wait_ms %d, want at most %d", w, 500-hold.Milliseconds())
	}
	if err := s.Response(answer(up[0]), &l.out); err != nil {
		t.Fatal(err)
	}
	up.Reset()
	if err := s.Request(fetch(2), &up, true); err != nil {
		t.Fatal(err)
	}
	if w := sentFetchWait(t, up[0]); w != 500 {
		t.Fatalf("a Fetch no re-authentication held was sent with max_wait_ms %d, want 500", w)
	}
}

// TestReauthTimerShortensNextFetch: the timer's re-authentication holds
// the request side; the Fetch relayed right after it (which waited behind
// it) has its duration taken off, and a Fetch that comes once the client
// has been idle longer than that keeps its wait.
func TestReauthTimerShortensNextFetch(t *testing.T) {
	for _, c := range []struct {
		name       string
		hold, idle time.Duration
		max, min   int32
	}{{"right after", 200 * time.Millisecond, 0, 300, 0}, {"idle since", 50 * time.Millisecond, 150 * time.Millisecond, 500, 500}} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newSession(t, 8)
			s.SetReauth(time.Now().Add(-time.Second), func(ctx context.Context, rt RoundTrip) (time.Time, error) {
				time.Sleep(c.hold)
				return time.Time{}, nil
			})
			var up Batch
			if err := s.Reauthenticate(&up); err != nil { // the timer, nothing in flight
				t.Fatal(err)
			}
			time.Sleep(c.idle)
			if err := s.Request(fetch(1), &up, true); err != nil {
				t.Fatal(err)
			}
			if w := sentFetchWait(t, up[len(up)-1]); w > c.max || w < c.min {
				t.Fatalf("the Fetch after the timer's re-authentication was sent with max_wait_ms %d, want %d-%d", w, c.min, c.max)
			}
		})
	}
}
