package telemetry

import (
	"encoding/binary"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// clock is a settable now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestLag(max int) (*Lag, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l := NewLag(LagConfig{Enabled: true, MaxSeries: max})
	l.now = c.now
	return l, c
}

// fetchReq is a Fetch request frame of version v: parts maps topic ->
// partition -> fetch offset; forgotten lists topic/partition pairs.
func fetchReq(v int16, epoch int32, iso int8, parts map[string]map[int32]int64, forgotten map[string][]int32) []byte {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch, req.IsolationLevel = v, -1, 1, epoch, iso
	// In sorted order, so a test knows which partitions come first (a
	// session keeps the first maxSessionPartitions).
	for _, topic := range slices.Sorted(maps.Keys(parts)) {
		ps := parts[topic]
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = topic, idOf(topic)
		for _, p := range slices.Sorted(maps.Keys(ps)) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset = p, ps[p]
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
	}
	for topic, ps := range forgotten {
		f := kmsg.NewFetchRequestForgottenTopic()
		f.Topic, f.TopicID, f.Partitions = topic, idOf(topic), ps
		req.ForgottenTopics = append(req.ForgottenTopics, f)
	}
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("app")).AppendRequest(nil, req, 1)
}

func idOf(topic string) [16]byte {
	var id [16]byte
	copy(id[:], topic)
	id[15] = 1
	return id
}

// part is one partition of a Fetch response.
type part struct {
	topic     string
	partition int32
	hw, lso   int64
	ts        int64 // first batch timestamp, ms; 0: no records
	err       int16
}

func fetchResp(v int16, parts ...part) []byte {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = v
	for _, p := range parts {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = p.topic, idOf(p.topic)
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.ErrorCode = p.partition, p.hw, p.lso, p.err
		if p.ts > 0 {
			b := kmsg.RecordBatch{Magic: 2, FirstTimestamp: p.ts, MaxTimestamp: p.ts, ProducerID: -1, NumRecords: 1, Records: []byte{0}, Length: 50}
			rp.RecordBatches = b.AppendTo(nil)
		}
		t.Partitions = append(t.Partitions, rp)
		resp.Topics = append(resp.Topics, t)
	}
	body := resp.AppendTo(nil)
	hdr := []byte{0, 0, 0, 1}
	if v >= 12 {
		hdr = append(hdr, 0)
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+len(body)))
	return append(append(frame, hdr...), body...)
}

// learnIDs makes the topic ids of names known, as a Metadata response
// would.
func learnIDs(t *testing.T, names ...string) *framing.TopicIDs {
	ids := framing.NewTopicIDs()
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	for _, n := range names {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = kmsg.StringPtr(n), idOf(n)
		resp.Topics = append(resp.Topics, mt)
	}
	body := resp.AppendTo(nil)
	hdr := []byte{0, 0, 0, 1, 0}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(hdr)+len(body)))
	ids.Learn(append(append(frame, hdr...), body...), 12)
	if ids.Name(idOf(names[0])) != names[0] {
		t.Fatalf("topic ids not learnt")
	}
	return ids
}

func request(t *testing.T, s *LagSession, frame []byte) {
	t.Helper()
	h, err := framing.ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	s.Request(frame, h, string(h.ClientID))
}

// scrape is the lag table's exposition text.
func scrape(t *testing.T, l *Lag) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	l.Register(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			b.WriteString(mf.GetName() + "{")
			for _, lp := range m.Label {
				b.WriteString(lp.GetName() + "=" + lp.GetValue() + ",")
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			b.WriteString("} " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
		}
	}
	return b.String()
}

func has(t *testing.T, text, line string) {
	t.Helper()
	if !strings.Contains(text, line+"\n") {
		t.Fatalf("no %q in:\n%s", line, text)
	}
}

// Every version: a full fetch's offsets against its response's high
// watermarks give each partition's lag, and the record timestamp its
// age; the group comes from the client id's group requests.
func TestLagEveryVersion(t *testing.T) {
	for v := int16(4); v <= kmsg.NewPtrFetchRequest().MaxVersion(); v++ {
		l, c := newTestLag(100)
		s := l.NewSession(learnIDs(t, "orders"))
		l.LearnGroup("app", "billing")
		request(t, s, fetchReq(v, -1, 0, map[string]map[int32]int64{"orders": {0: 40, 1: 7}}, nil))
		s.Response(fetchResp(v, part{topic: "orders", partition: 0, hw: 100, lso: 90, ts: c.t.UnixMilli() - 2500},
			part{topic: "orders", partition: 1, hw: 7, lso: 7}), v, l.now())
		text := scrape(t, l)
		has(t, text, "kproxy_consumer_lag_records{client_id=app,group=billing,partition=0,topic=orders,} 60")
		has(t, text, "kproxy_consumer_lag_seconds{client_id=app,group=billing,partition=0,topic=orders,} 2.5")
		has(t, text, "kproxy_consumer_lag_records{client_id=app,group=billing,partition=1,topic=orders,} 0")
		has(t, text, "kproxy_consumer_lag_seconds{client_id=app,group=billing,partition=1,topic=orders,} 0")
	}
}

// An incremental fetch session: requests name only the partitions that
// moved, responses only those that changed; forgotten partitions leave;
// read_committed measures from the last stable offset; errors and ids
// not learnt are skipped.
func TestLagFetchSession(t *testing.T) {
	l, _ := newTestLag(100)
	s := l.NewSession(learnIDs(t, "orders", "audit"))
	request(t, s, fetchReq(13, 0, 1, map[string]map[int32]int64{"orders": {0: 10, 1: 20}, "audit": {0: 5}}, nil))
	s.Response(fetchResp(13, part{topic: "orders", partition: 0, hw: 50, lso: 30}, part{topic: "orders", partition: 1, hw: 25, lso: 25},
		part{topic: "audit", partition: 0, hw: 9, lso: 9}), 13, l.now())
	text := scrape(t, l)
	has(t, text, "kproxy_consumer_lag_records{client_id=app,group=,partition=0,topic=orders,} 20") // LSO 30 - 10
	has(t, text, "kproxy_consumer_lag_records{client_id=app,group=,partition=1,topic=orders,} 5")
	// Incremental: orders/0 moved to 28 with no new data (not in the
	// response), audit/0 forgotten, orders/1 in the response with an error.
	request(t, s, fetchReq(13, 1, 1, map[string]map[int32]int64{"orders": {0: 28}}, map[string][]int32{"audit": {0}}))
	s.Response(fetchResp(13, part{topic: "orders", partition: 1, hw: 99, lso: 99, err: 6}, part{topic: "ghost", partition: 0, hw: 9}), 13, l.now())
	text = scrape(t, l)
	has(t, text, "kproxy_consumer_lag_records{client_id=app,group=,partition=0,topic=orders,} 2")
	has(t, text, "kproxy_consumer_lag_records{client_id=app,group=,partition=1,topic=orders,} 5")
	if s.count != 2 {
		t.Fatalf("%d partitions in the session after audit/0 was forgotten, want 2", s.count)
	}
	// A new full request replaces the session.
	request(t, s, fetchReq(13, 0, 0, map[string]map[int32]int64{"audit": {3: 1}}, nil))
	s.Response(fetchResp(13, part{topic: "audit", partition: 3, hw: 4}, part{topic: "orders", partition: 0, hw: 1000}), 13, l.now())
	text = scrape(t, l)
	has(t, text, "kproxy_consumer_lag_records{client_id=app,group=,partition=3,topic=audit,} 3")
	has(t, text, "kproxy_consumer_lag_records{client_id=app,group=,partition=0,topic=orders,} 2") // left the session: not remeasured
}

// Past max_series, new partitions are summed per topic; past ten times
// that, measurements are dropped and counted; idle series go after
// LagIdle.
func TestLagBounds(t *testing.T) {
	l, c := newTestLag(2)
	s := l.NewSession(framing.NewTopicIDs())
	request(t, s, fetchReq(12, -1, 0, map[string]map[int32]int64{"a": {0: 0, 1: 0}, "b": {0: 0, 1: 0, 2: 0}}, nil))
	var parts []part
	for _, p := range []struct {
		t string
		p int32
	}{{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}, {"b", 2}} {
		parts = append(parts, part{topic: p.t, partition: p.p, hw: 10})
	}
	s.Response(fetchResp(12, parts...), 12, l.now())
	text := scrape(t, l)
	has(t, text, `kproxy_consumer_lag_partitions{export=own,} 2`)
	has(t, text, `kproxy_consumer_lag_partitions{export=folded,} 3`)
	if n := strings.Count(text, "kproxy_consumer_lag_records{"); n != 3 {
		t.Fatalf("%d lag series, want 2 of their own and 1 sum:\n%s", n, text)
	}
	if !strings.Contains(text, "partition=all,") {
		t.Fatalf("no per-topic sum:\n%s", text)
	}

	c.t = c.t.Add(LagIdle + time.Second)
	text = scrape(t, l)
	if strings.Contains(text, "kproxy_consumer_lag_records{") {
		t.Fatalf("series still exported %v after their last fetch:\n%s", LagIdle, text)
	}

	// Past foldedFactor*max, measurements are dropped.
	big := map[int32]int64{}
	for p := int32(0); p < 40; p++ {
		big[p] = 0
	}
	request(t, s, fetchReq(12, -1, 0, map[string]map[int32]int64{"c": big}, nil))
	parts = parts[:0]
	for p := int32(0); p < 40; p++ {
		parts = append(parts, part{topic: "c", partition: p, hw: 1})
	}
	s.Response(fetchResp(12, parts...), 12, l.now())
	text = scrape(t, l)
	has(t, text, "kproxy_consumer_lag_dropped_total{} 18") // 40 - 2 own - 20 folded
}

// A Fetch naming more partitions than a session keeps is measured up to
// the bound, and the rest ignored: memory stays bounded whatever a
// client names.
func TestLagSessionBound(t *testing.T) {
	l, _ := newTestLag(10)
	s := l.NewSession(framing.NewTopicIDs())
	parts := map[int32]int64{}
	for p := int32(0); p < maxSessionPartitions+5000; p++ {
		parts[p] = 0
	}
	request(t, s, fetchReq(12, -1, 0, map[string]map[int32]int64{"many": parts}, nil))
	if s.count != maxSessionPartitions {
		t.Fatalf("%d partitions kept, want the bound %d", s.count, maxSessionPartitions)
	}
	s.Response(fetchResp(12, part{topic: "many", partition: 0, hw: 5}), 12, l.now())
	if n := len(l.series) + l.nFolded; n != 1 {
		t.Fatalf("%d entries in the table after one partition answered", n)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, -1, maxSeriesLimit + 1} {
		c := Defaults()
		c.Lag.MaxSeries = n
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "lag.max_series") {
			t.Fatalf("max_series %d: %v", n, err)
		}
	}
}
