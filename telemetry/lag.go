package telemetry

import (
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LagIdle is how long a partition's series outlives its last Fetch: a
// consumer that stopped, moved to another broker or lost the partition
// in a rebalance stops being reported.
const LagIdle = 5 * time.Minute

// foldedFactor bounds the partitions summed into per-topic series, as a
// multiple of max_series: the sums need each partition's own value, and
// what a client sends must not grow memory without end.
const foldedFactor = 10

// Lag is the process-wide consumer lag table: one entry per client id,
// topic and partition that consumers fetch through kproxy, with the
// consumer group each client id was last seen using. Sessions feed it
// (LagSession); Prometheus reads it (the collector in lag_metrics.go).
type Lag struct {
	max int
	now func() time.Time

	mu     sync.Mutex
	series map[partKey]*lagValue // exported one by one, at most max
	// folded are the partitions past max: each topic's sum is exported.
	folded    map[topicKey]map[int32]*lagValue
	nFolded   int
	groups    map[string]groupSeen // client id -> its group
	dropped   uint64               // observations past every bound
	lastSweep time.Time
}

type partKey struct {
	client, topic string
	partition     int32
}

type topicKey struct{ client, topic string }

type groupSeen struct {
	group string
	seen  time.Time
}

// lagValue is one partition's lag as last measured. A session keeps a
// pointer to it and updates it without the table's lock; the sweep marks
// a value it drops gone, and the session then asks the table again.
type lagValue struct {
	records atomic.Int64
	seconds atomic.Uint64 // float64 bits; NaN: no record timestamp read yet
	seen    atomic.Int64  // unix nanoseconds
	gone    atomic.Bool
}

var noSeconds = math.Float64bits(math.NaN())

func newValue() *lagValue {
	v := &lagValue{}
	v.seconds.Store(noSeconds)
	return v
}

// set records one measurement at now (unix nanoseconds).
func (v *lagValue) set(m measurement, now int64) {
	v.records.Store(m.records)
	switch {
	case m.records == 0:
		v.seconds.Store(0)
	case m.seconds >= 0:
		v.seconds.Store(math.Float64bits(m.seconds))
	}
	v.seen.Store(now)
}

// secondsValue is the age last read, ok false before any.
func (v *lagValue) secondsValue() (float64, bool) {
	b := v.seconds.Load()
	if b == noSeconds {
		return 0, false
	}
	return math.Float64frombits(b), true
}

// NewLag returns an empty table bounded by c.MaxSeries, or nil when
// telemetry.lag is off (nil costs sessions one comparison per frame).
func NewLag(c LagConfig) *Lag {
	if !c.Enabled {
		return nil
	}
	return &Lag{max: c.MaxSeries, now: time.Now, series: map[partKey]*lagValue{},
		folded: map[topicKey]map[int32]*lagValue{}, groups: map[string]groupSeen{}}
}

// LearnGroup records that client (a client id) works for group: a
// consumer's group requests name it, its Fetch requests do not. Both may
// alias a request frame (kmsg's unsafe decoding): what is kept is copied.
func (l *Lag) LearnGroup(client, group string) {
	if group == "" {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if g, ok := l.groups[client]; ok || len(l.groups) < l.max {
		if g.group != group {
			g.group = strings.Clone(group)
		}
		g.seen = now
		if !ok {
			client = strings.Clone(client)
		}
		l.groups[client] = g
		return
	}
	l.dropped++
}

// measurement is one partition's lag from one Fetch response.
type measurement struct {
	topic     string
	partition int32
	records   int64
	seconds   float64 // < 0: no timestamp in this response
}

// resolve finds or makes the entries of the measurements whose session
// holds none (vs[i] nil or gone), under one lock, and records them; nil
// entries are past every bound and dropped.
func (l *Lag) resolve(client string, ms []measurement, vs []*lagValue, now int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range ms {
		if vs[i] != nil && !vs[i].gone.Load() {
			continue
		}
		vs[i] = l.value(client, ms[i].topic, ms[i].partition)
		if vs[i] == nil {
			l.dropped++
			continue
		}
		vs[i].set(ms[i], now)
	}
	if t := l.now(); t.Sub(l.lastSweep) > LagIdle/10 {
		l.sweep(t)
	}
}

// value is the entry of one partition, made when there is room: as a
// series of its own below max, else in its topic's sum; nil past both
// bounds.
func (l *Lag) value(client, topic string, partition int32) *lagValue {
	if v, ok := l.series[partKey{client, topic, partition}]; ok {
		return v
	}
	tk := topicKey{client, topic}
	if parts, ok := l.folded[tk]; ok {
		if v, ok := parts[partition]; ok {
			return v
		}
	}
	v := newValue()
	switch {
	case len(l.series) < l.max:
		l.series[partKey{client, topic, partition}] = v
	case l.nFolded < foldedFactor*l.max:
		parts := l.folded[tk]
		if parts == nil {
			parts = map[int32]*lagValue{}
			l.folded[tk] = parts
		}
		parts[partition] = v
		l.nFolded++
	default:
		return nil
	}
	return v
}

// sweep drops what has not been seen for LagIdle, marking it gone for
// the sessions that still point at it.
func (l *Lag) sweep(now time.Time) {
	l.lastSweep = now
	idle := func(v *lagValue) bool {
		if now.UnixNano()-v.seen.Load() <= int64(LagIdle) {
			return false
		}
		v.gone.Store(true)
		return true
	}
	for k, v := range l.series {
		if idle(v) {
			delete(l.series, k)
		}
	}
	for tk, parts := range l.folded {
		for p, v := range parts {
			if idle(v) {
				delete(parts, p)
				l.nFolded--
			}
		}
		if len(parts) == 0 {
			delete(l.folded, tk)
		}
	}
	for c, g := range l.groups {
		if now.Sub(g.seen) > LagIdle {
			delete(l.groups, c)
		}
	}
}
