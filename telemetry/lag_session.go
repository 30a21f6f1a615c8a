package telemetry

import (
	"sync"
	"time"

	"github.com/kproxy/kproxy/framing"
)

// maxSessionPartitions bounds the partitions one connection's fetch
// session may hold here: a Fetch request may name millions within
// max_request_bytes, and a real consumer names thousands at most.
const maxSessionPartitions = 1 << 16

// LagSession measures the lag of one client connection's fetches. It
// keeps the connection's fetch session (KIP-227): an incremental Fetch
// request names only the partitions whose offset moved, and its
// response only those with new records or a new high watermark, so each
// partition's last fetch offset and end offset are remembered here. The
// request path and the response path call it from their own goroutines.
type LagSession struct {
	lag    *Lag
	topics *framing.TopicIDs

	mu        sync.Mutex
	client    string
	isolation int8
	gen       uint32 // bumped by each full request: older partitions left the session
	resp      uint32 // bumped by each response
	byName    map[string]*topicState
	count     int
	requested []requested   // the last request's partitions, reused
	ms        []measurement // measurements with no table entry yet, reused
	vs        []*lagValue   // their entries, once resolved
	pending   []*partState  // their partitions
	now       time.Time     // the response being read
	last      *topicState   // the topic last looked up: consumers fetch few
}

type topicState struct {
	name  string
	parts map[int32]*partState
}

type partState struct {
	offset, end int64 // fetch offset; high watermark or last stable offset, -1 unknown
	gen, resp   uint32
	v           *lagValue // its entry in the table, nil until the first measurement
}

type requested struct {
	ts        *topicState
	st        *partState // nil for a forgotten partition, or one past the bound
	partition int32
	offset    int64
	forgotten bool
}

// NewSession returns the lag state of one connection, nil when l is
// (telemetry.lag off). topics names the topic ids of Fetch v13+.
func (l *Lag) NewSession(topics *framing.TopicIDs) *LagSession {
	if l == nil {
		return nil
	}
	return &LagSession{lag: l, topics: topics, byName: map[string]*topicState{}}
}

// Request reads a Fetch request (h its parsed header) sent by client,
// and returns what the walk found, for the relay's other uses of it.
func (s *LagSession) Request(frame []byte, h framing.RequestHeader, client string) (framing.FetchRequestInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requested = s.requested[:0]
	info, ok := framing.WalkFetchRequest(frame, h, s.visitRequest)
	if !ok {
		s.requested = s.requested[:0]
		return info, false
	}
	s.client, s.isolation = client, info.Isolation
	if info.Full() {
		s.gen++
	}
	for _, r := range s.requested {
		if r.forgotten {
			if r.ts.parts[r.partition] != nil {
				delete(r.ts.parts, r.partition)
				s.count--
			}
			continue
		}
		if r.st != nil {
			r.st.offset, r.st.gen = r.offset, s.gen
		}
	}
	if info.Full() && s.count > 2*len(s.requested) {
		s.forgetLeft()
	}
	return info, true
}

func (s *LagSession) visitRequest(p framing.FetchPartition) {
	ts := s.topic(p.Topic, p.TopicID, true)
	if ts == nil {
		return
	}
	r := requested{ts: ts, partition: p.Partition, offset: p.Offset, forgotten: p.Forgotten}
	if !p.Forgotten {
		r.st = ts.parts[p.Partition]
		if r.st == nil && s.count < maxSessionPartitions {
			r.st = &partState{end: -1}
			ts.parts[p.Partition] = r.st
			s.count++
		}
	}
	s.requested = append(s.requested, r)
}

// topic finds a topic's state by name, or by id through the names
// learnt from Metadata; make adds it. nil for an id not learnt yet.
func (s *LagSession) topic(name []byte, id [16]byte, make bool) *topicState {
	if s.last != nil && name != nil && string(name) == s.last.name {
		return s.last
	}
	ts := s.findTopic(name, id, make)
	if ts != nil {
		s.last = ts
	}
	return ts
}

func (s *LagSession) findTopic(name []byte, id [16]byte, make bool) *topicState {
	if name == nil {
		n := s.topics.Name(id)
		if n == "" {
			return nil
		}
		return s.topicNamed(n, make)
	}
	if ts, ok := s.byName[string(name)]; ok || !make {
		return ts
	}
	return s.topicNamed(string(name), true)
}

func (s *LagSession) topicNamed(name string, make bool) *topicState {
	if ts, ok := s.byName[name]; ok || !make {
		return ts
	}
	ts := &topicState{name: name, parts: map[int32]*partState{}}
	s.byName[name] = ts
	return ts
}

// forgetLeft drops the partitions a full request no longer names.
func (s *LagSession) forgetLeft() {
	for n, ts := range s.byName {
		for p, st := range ts.parts {
			if st.gen != s.gen {
				delete(ts.parts, p)
				s.count--
			}
		}
		if len(ts.parts) == 0 {
			delete(s.byName, n)
			if s.last == ts {
				s.last = nil
			}
		}
	}
}

// Response reads the Fetch response to the last request (of version) and
// reports each partition's lag: the partitions it carries, and those the
// request moved, from their last known end. A partition whose table entry
// the session holds is updated in place; the others are resolved in the
// table under its lock, once per response. now is when the response was
// read (the relay's clock for its batch).
func (s *LagSession) Response(frame []byte, version int16, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resp++
	s.ms, s.vs, s.pending = s.ms[:0], s.vs[:0], s.pending[:0]
	s.now = now
	if !framing.WalkFetchResponse(frame, version, s.visitResponse) {
		return
	}
	for _, r := range s.requested {
		st := r.st
		if st == nil || st.resp == s.resp || st.end < 0 || st.gen != s.gen {
			continue
		}
		st.resp = s.resp
		s.measure(st, measurement{r.ts.name, r.partition, max(st.end-st.offset, 0), -1})
	}
	if len(s.ms) > 0 {
		s.lag.resolve(s.client, s.ms, s.vs, s.now.UnixNano())
		for i, st := range s.pending {
			st.v = s.vs[i]
		}
	}
}

// measure records m for st: in place when st holds a live entry.
func (s *LagSession) measure(st *partState, m measurement) {
	if st.v != nil && !st.v.gone.Load() {
		st.v.set(m, s.now.UnixNano())
		return
	}
	s.ms, s.vs, s.pending = append(s.ms, m), append(s.vs, nil), append(s.pending, st)
}

func (s *LagSession) visitResponse(p framing.FetchedPartition) {
	if p.ErrorCode != 0 {
		return
	}
	ts := s.topic(p.Topic, p.TopicID, false)
	if ts == nil {
		return
	}
	st := ts.parts[p.Partition]
	if st == nil || st.gen != s.gen {
		return
	}
	end := p.HighWatermark
	if s.isolation == 1 && p.LastStableOffset >= 0 {
		end = p.LastStableOffset // read_committed reads up to it
	}
	st.end, st.resp = end, s.resp
	lag := max(end-st.offset, 0)
	secs := -1.0
	if p.FirstTimestamp >= 0 && lag > 0 {
		secs = max(float64(s.now.UnixMilli()-p.FirstTimestamp)/1000, 0)
	}
	s.measure(st, measurement{ts.name, p.Partition, lag, secs})
}
