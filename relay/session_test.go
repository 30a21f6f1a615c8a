package relay

import (
	"encoding/binary"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// link is a driver as a test plays it: it records what the session asks.
type link struct {
	mu      sync.Mutex
	flushed []Batch // each FlushUp's frames, copied
	answers []bool  // each Answer's async
	unread  int
	waits   atomic.Int32
	sess    *Session
	out     Batch // where Answer writes (a driver's client batch)
}

func (l *link) FlushUp(up *Batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushed = append(l.flushed, append(Batch(nil), *up...))
	up.Reset()
	return nil
}
func (l *link) Unread() int { return l.unread }
func (l *link) WaitStart()  { l.waits.Add(1) }
func (l *link) WaitEnd()    {}
func (l *link) Released()   {}
func (l *link) Answer(async bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, async)
	l.sess.Answers(&l.out)
	return nil
}

// newSession is a session with rules (nil: none) and a table of size
// inFlight, and the link it drives.
func newSession(t *testing.T, inFlight int, rules ...policy.Rule) (*Session, *link) {
	t.Helper()
	var p atomic.Pointer[policy.Engine]
	if len(rules) > 0 {
		c := policy.Config{Rules: rules}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		p.Store(policy.New(c, policy.NewMetrics(prometheus.NewRegistry())))
	}
	env := &Env{Framing: framing.Defaults(), Table: correlate.Config{MaxInFlight: inFlight},
		Metrics: NewMetrics(prometheus.NewRegistry()), Topics: framing.NewTopicIDs(), Policies: &p,
		Listener: "127.0.0.1:9092", MaxUnread: 1 << 20}
	l := &link{}
	l.sess = New(env, l, zerolog.Nop(), nil)
	return l.sess, l
}

// request is a whole request frame of req with correlation id corr.
func request(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("relay-test")).AppendRequest(nil, req, corr)
}

// answer is the broker's whole response frame to a request frame as
// forwarded (kproxy's id in it), an ApiVersions v0 answer.
func answer(forwarded []byte) []byte {
	body := kmsg.NewPtrApiVersionsResponse().AppendTo(nil)
	f := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(f, uint32(4+len(body)))
	copy(f[4:], forwarded[8:12])
	return append(f, body...)
}

func corr(frame []byte, request bool) int32 {
	if request {
		return int32(binary.BigEndian.Uint32(frame[8:]))
	}
	return int32(binary.BigEndian.Uint32(frame[4:]))
}

// Requests leave with kproxy's correlation ids and their responses come
// back with the client's, in order, counted; no transport is involved.
func TestSessionRewritesAndRestoresIDs(t *testing.T) {
	s, _ := newSession(t, 8)
	var up, out Batch
	for _, c := range []int32{500, 7, 500} { // a client may reuse ids
		if err := s.Request(request(kmsg.NewPtrApiVersionsRequest(), c), &up, false); err != nil {
			t.Fatal(err)
		}
	}
	s.CountRequests()
	seen := map[int32]bool{}
	for _, f := range up {
		if seen[corr(f, true)] {
			t.Fatalf("two forwarded requests share kproxy's id %d", corr(f, true))
		}
		seen[corr(f, true)] = true
	}
	for _, f := range up {
		if err := s.Response(answer(f), &out); err != nil {
			t.Fatal(err)
		}
	}
	s.Written(true)
	s.EndSpans(true)
	var got []int32
	for _, f := range out {
		got = append(got, corr(f, false))
	}
	if len(got) != 3 || got[0] != 500 || got[1] != 7 || got[2] != 500 {
		t.Fatalf("responses carry client ids %v, want [500 7 500]", got)
	}
	if st := s.Stats(); st.Requests != 3 || st.Responses != 3 || s.InFlight() != 0 {
		t.Fatalf("stats %+v, %d in flight", st, s.InFlight())
	}
}

// A refused request is answered by kproxy in its place: the answer waits
// behind the response to the request before it, and the driver is asked
// to write it (from another goroutine when the relay may not wait).
func TestSessionAnswersInPlace(t *testing.T) {
	s, l := newSession(t, 8, policy.Rule{Name: "no-deletes", Action: policy.ActionReject,
		Match: policy.Selector{APIs: []string{"DeleteTopics"}}})
	var up, out Batch
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version = 4
	del.TopicNames = []string{"x"}
	for i, req := range []kmsg.Request{kmsg.NewPtrApiVersionsRequest(), del, kmsg.NewPtrApiVersionsRequest()} {
		if err := s.Request(request(req, int32(10+i)), &up, false); err != nil {
			t.Fatal(err)
		}
	}
	if len(up) != 2 {
		t.Fatalf("%d frames forwarded, want 2 (the DeleteTopics is refused)", len(up))
	}
	if len(l.answers) != 1 || !l.answers[0] || len(l.out) != 0 {
		t.Fatalf("Answer calls %v, answers written %d: want one async call writing nothing yet (a response is owed ahead)", l.answers, len(l.out))
	}
	for _, f := range up {
		if err := s.Response(answer(f), &out); err != nil {
			t.Fatal(err)
		}
	}
	var got []int32
	for _, f := range out {
		got = append(got, corr(f, false))
	}
	if len(got) != 3 || got[0] != 10 || got[1] != 11 || got[2] != 12 {
		t.Fatalf("client ids in order %v, want [10 11 12]", got)
	}
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.Version = 4
	if err := resp.ReadFrom(out[1][8+1:]); err != nil { // v4 is flexible: an empty tag section after the id
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode == 0 {
		t.Fatalf("kproxy's answer %+v carries no error", resp.Topics)
	}
}

// A full table fails a relay that may not wait, and makes one that may
// flush what it batched and wait until a response makes room.
func TestSessionWaitsForRoom(t *testing.T) {
	s, l := newSession(t, 1)
	var up, out Batch
	if err := s.Request(request(kmsg.NewPtrApiVersionsRequest(), 1), &up, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Request(request(kmsg.NewPtrApiVersionsRequest(), 2), &up, false); !errors.Is(err, ErrWouldWait) {
		t.Fatalf("full table without waiting: %v, want ErrWouldWait", err)
	}
	first := append([]byte(nil), up[0]...)
	done := make(chan error, 1)
	go func() { done <- s.Request(request(kmsg.NewPtrApiVersionsRequest(), 3), &up, true) }()
	for l.waits.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	l.mu.Lock()
	flushed := len(l.flushed) == 1 && len(l.flushed[0]) == 1
	l.mu.Unlock()
	if !flushed {
		t.Fatal("the session waited without flushing the request whose response makes room")
	}
	if err := s.Response(answer(first), &out); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after room was made: %v", err)
	}
	if len(up) != 1 || corr(out[0], false) != 1 {
		t.Fatalf("batch %d frames, response id %d", len(up), corr(out[0], false))
	}
}

// A produce with acks=0 gets no entry: no response will come for it.
func TestSessionAcksZero(t *testing.T) {
	s, _ := newSession(t, 4)
	p := kmsg.NewPtrProduceRequest()
	p.Version, p.Acks = 7, 0
	var up Batch
	if err := s.Request(request(p, 5), &up, false); err != nil {
		t.Fatal(err)
	}
	if len(up) != 1 || s.InFlight() != 0 {
		t.Fatalf("%d frames forwarded, %d in flight: want 1 and 0", len(up), s.InFlight())
	}
}

// relay has no transport in it (no netpoll), and correlate no tracer.
func TestSessionImportsNoTransport(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "netpoll") {
			t.Fatalf("relay depends on %s", dep)
		}
	}
	out, err = exec.Command("go", "list", "-deps", "../correlate").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "kproxy/tracing") {
		t.Fatal("correlate depends on tracing")
	}
}
