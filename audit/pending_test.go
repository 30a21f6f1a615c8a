package audit

import (
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

func deleteTopicsReq(t *testing.T, names ...string) *kmsg.DeleteTopicsRequest {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = names
	return wire(t, req, 4)
}

func TestUnknownKeepsRefusals(t *testing.T) {
	h := newHarness(t, Defaults())
	req := deleteTopicsReq(t, "a", "b")
	p := h.log.Begin(testConn, req.Key(), 4, req)
	p.Refuse("a", "no-deletes", "rule no-deletes")
	p.Unknown()
	ln := h.one()
	rs := resources(t, ln)
	wantFields(t, "line", ln, map[string]string{"outcome": "unknown"})
	wantFields(t, "a", rs[0], map[string]string{"outcome": "POLICY_VIOLATION", "rule": "no-deletes"})
	wantFields(t, "b", rs[1], map[string]string{"outcome": "unknown", "rule": ""})
}

func TestSettleNilIsUnknown(t *testing.T) {
	h := newHarness(t, Defaults())
	req := deleteTopicsReq(t, "a")
	h.log.Begin(testConn, req.Key(), 4, req).Settle(nil)
	wantFields(t, "line", h.one(), map[string]string{"outcome": "unknown"})
}

// Once finished, a Pending ignores every call: one line, as first written.
func TestFinishedPendingIsInert(t *testing.T) {
	h := newHarness(t, Defaults())
	req := deleteTopicsReq(t, "a")
	p := h.log.Begin(testConn, req.Key(), 4, req)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.Topics = []kmsg.DeleteTopicsResponseTopic{{Topic: ptr("a")}}
	p.Settle(resp)
	p.Refuse("a", "late", "late")
	p.Refused("late", kerr.PolicyViolation.Code, "late")
	p.Unknown()
	p.Settle(resp)
	ln := h.one()
	wantFields(t, "line", ln, map[string]string{"outcome": "ok", "rule": ""})
	wantFields(t, "a", resources(t, ln)[0], map[string]string{"outcome": "NONE", "rule": ""})
	if got := testutil.ToFloat64(h.m.lines); got != 1 {
		t.Errorf("lines_total %v, want 1", got)
	}
}

func TestNilSafe(t *testing.T) {
	var l *Log
	if l.Audits(framing.KeyCreateTopics) {
		t.Error("a nil Log audits")
	}
	req := deleteTopicsReq(t, "a")
	if l.Begin(testConn, req.Key(), 4, req) != nil || l.BeginRefusal(testConn, req.Key(), 4, req) != nil {
		t.Error("a nil Log began a line")
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
	var p *Pending
	p.Refuse("a", "r", "m")
	p.RefuseCode("a", "r", 1, "m")
	p.Refused("r", 1, "m")
	p.Settle(kmsg.NewPtrDeleteTopicsResponse())
	p.Unknown()

	off, err := Open(Defaults(), nil, Env{})
	if off != nil || err != nil {
		t.Errorf("Open of a disabled section = %v, %v; want nil, nil", off, err)
	}
}

// The apis list narrows Begin; refusals of any API are still audited.
func TestAPIsList(t *testing.T) {
	c := Defaults()
	c.APIs = []string{"DeleteTopics"}
	h := newHarness(t, c)
	if !h.log.Audits(framing.KeyDeleteTopics) || h.log.Audits(framing.KeyCreateTopics) {
		t.Fatal("apis list not applied")
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	if h.log.Begin(testConn, ct.Key(), 4, ct) != nil {
		t.Fatal("Begin of an API left out of apis")
	}
	h.log.BeginRefusal(testConn, ct.Key(), 4, ct).Refused("r", kerr.PolicyViolation.Code, "m")
	wantFields(t, "line", h.one(), map[string]string{"api": "CreateTopics", "outcome": "refused"})

	all := newHarness(t, Defaults())
	for k := int16(0); k <= framing.MaxKey; k++ {
		if all.log.Audits(k) != ChangesCluster(k) {
			t.Errorf("%s: Audits %v with no apis list", framing.Name(k), all.log.Audits(k))
		}
	}
	for _, name := range []string{"Produce", "OffsetCommit", "TxnOffsetCommit", "EndTxn", "WriteTxnMarkers", "AlterPartition", "Fetch"} {
		if k, _ := framing.KeyForName(name); ChangesCluster(k) {
			t.Errorf("%s counted as changing cluster state", name)
		}
	}
}

// Begin copies what it keeps, match keys included: the relay reuses the
// frame a request was decoded from (without copying) once Begin returns.
func TestBeginCopiesStrings(t *testing.T) {
	h := newHarness(t, Defaults())
	unsafeDecode := func(src kmsg.Request, version int16) (kmsg.Request, []byte) {
		src.SetVersion(version)
		frame := src.AppendTo(nil)
		req := kmsg.RequestForKey(src.Key())
		req.SetVersion(version)
		if err := req.(kmsg.UnsafeReadFrom).UnsafeReadFrom(frame); err != nil {
			t.Fatal(err)
		}
		return req, frame
	}
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "orders", NumPartitions: 1, ReplicationFactor: 1, Configs: []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: ptr("1000")}}}}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "orders", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0}}}}

	req, frame := unsafeDecode(ct, 5)
	p := h.log.Begin(Conn{ClientID: string([]byte("orders-admin"))}, req.Key(), 5, req)
	req2, frame2 := unsafeDecode(lo, 7)
	p2 := h.log.BeginRefusal(testConn, req2.Key(), 7, req2)
	for _, f := range [][]byte{frame, frame2} {
		for i := range f {
			f[i] = 'X'
		}
	}
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Topics = []kmsg.CreateTopicsResponseTopic{{Topic: "orders", ErrorCode: 36}}
	p.Settle(resp)
	// A Produce answer maps topics by name: it exercises the generic
	// resources' keys.
	resp2 := kmsg.NewPtrProduceResponse()
	resp2.Topics = []kmsg.ProduceResponseTopic{{Topic: "orders", Partitions: []kmsg.ProduceResponseTopicPartition{{ErrorCode: 6}}}}
	p2.Settle(resp2)
	ls := h.lines()
	wantFields(t, "create", resources(t, ls[0])[0], map[string]string{"name": "orders", "configs": `{"retention.ms":"1000"}`, "outcome": "TOPIC_ALREADY_EXISTS"})
	wantFields(t, "list offsets", resources(t, ls[1])[0], map[string]string{"name": "orders", "partitions": "[0]", "outcome": "NOT_LEADER_FOR_PARTITION"})
}

// Begin on the request's goroutine, Settle on another's: and a Refuse
// racing an Unknown from a closing connection still gives one whole line.
func TestPendingAcrossGoroutines(t *testing.T) {
	h := newHarness(t, Defaults())
	const n = 200
	handoff := make(chan *Pending)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := range handoff {
			var race sync.WaitGroup
			race.Add(2)
			go func() { defer race.Done(); p.Refuse("a", "r", "m") }()
			go func() { defer race.Done(); p.Unknown() }()
			race.Wait()
			p.Settle(kmsg.NewPtrDeleteTopicsResponse())
		}
	}()
	for range n {
		req := deleteTopicsReq(t, "a", "b")
		handoff <- h.log.Begin(testConn, req.Key(), 4, req)
	}
	close(handoff)
	wg.Wait()
	ls := h.lines()
	if len(ls) != n {
		t.Fatalf("%d lines, want %d", len(ls), n)
	}
	for _, ln := range ls {
		if field(ln, "outcome") != "unknown" {
			t.Fatalf("outcome %q, want unknown (Unknown finished every one)", field(ln, "outcome"))
		}
	}
}

// A refusal of a resource Begin did not record (a topic deleted by id
// that the relay names) is added to the line.
func TestRefuseUnrecordedResource(t *testing.T) {
	h := newHarness(t, Defaults())
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: [16]byte{9}}}
	req = wire(t, req, 6)
	p := h.log.Begin(testConn, req.Key(), 6, req)
	p.Refuse("orders", "keep-orders", "orders is protected")
	p.Refused("keep-orders", kerr.TopicAuthorizationFailed.Code, "orders is protected")
	rs := resources(t, h.one())
	if len(rs) != 2 {
		t.Fatalf("resources %v", rs)
	}
	wantFields(t, "by id", rs[0], map[string]string{"outcome": "TOPIC_AUTHORIZATION_FAILED"})
	wantFields(t, "added", rs[1], map[string]string{"type": "topic", "name": "orders", "outcome": "POLICY_VIOLATION", "rule": "keep-orders"})
}

// Codes are spelled as Kafka spells them.
func TestCodeName(t *testing.T) {
	for code, want := range map[int16]string{0: "NONE", 44: "POLICY_VIOLATION", 29: "TOPIC_AUTHORIZATION_FAILED", -1: "UNKNOWN_SERVER_ERROR", 32000: "UNKNOWN_CODE_32000"} {
		if got := codeName(code); got != want {
			t.Errorf("codeName(%d) = %q, want %q", code, got, want)
		}
	}
	long := "a" + strings.Repeat("é", maxString) // byte maxString is inside a rune
	if c := cut(long); !utf8.ValidString(c) || !strings.HasSuffix(c, "...(1026 more bytes)") {
		t.Errorf("cut(%d bytes) = ...%q", len(long), c[len(c)-40:])
	}
}
