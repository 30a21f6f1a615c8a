package policy

import (
	"strings"
	"time"
)

// maxKeyedMeters bounds the meters of one rule keyed by client id or
// topic: clients choose those names.
const maxKeyedMeters = 100_000

// evictScan is how many of the least recently used keys a new key past
// the bound looks at to find one to drop.
const evictScan = 8

// keyedMeters are one rule's meters by client id or by topic, at most max
// of them. Past the bound a new key replaces an old one, never all of
// them: a client that rotates its ids must not wipe the debt of others,
// nor its own debt by waiting for it to be dropped.
//
// Dropping a key whose buckets are full again loses nothing, since a new
// key starts full. So the keys are kept in order of use, and a new key
// drops the least recently used of them that is full; when none of the
// evictScan least recently used is, it drops the one of those that will be
// full soonest (the smallest debt forgiven). The keys it looked at and
// kept move to the front, so the next look sees others.
//
// Its rule's lock guards it. Finding a key allocates nothing; only a new
// key does.
type keyedMeters struct {
	max   int
	byKey map[string]*keyedMeter
	ring  keyedMeter // sentinel: ring.next is the most recently used key
}

// keyedMeter is a meter with its key and its place in the order of use.
type keyedMeter struct {
	meter
	key        string
	prev, next *keyedMeter
}

func newKeyedMeters(max int) *keyedMeters {
	k := &keyedMeters{max: max, byKey: map[string]*keyedMeter{}}
	k.ring.prev, k.ring.next = &k.ring, &k.ring
	return k
}

// get returns key's meter. fresh says it is new: the caller gives it its
// buckets before letting go of the rule's lock.
func (k *keyedMeters) get(key string, now time.Time) (m *meter, fresh bool) {
	if e, ok := k.byKey[key]; ok {
		k.unlink(e)
		k.pushFront(e)
		return &e.meter, false
	}
	if len(k.byKey) >= k.max {
		k.evict(now)
	}
	e := &keyedMeter{key: strings.Clone(key)}
	k.byKey[e.key] = e
	k.pushFront(e)
	return &e.meter, true
}

// evict drops one key (see keyedMeters).
func (k *keyedMeters) evict(now time.Time) {
	t := float64(now.UnixNano())
	var victim *keyedMeter
	var soonest float64
	seen := 0
	for e := k.ring.prev; e != &k.ring && seen < evictScan; e = e.prev {
		seen++
		full := e.fullAt()
		if full <= t {
			victim = e
			break
		}
		if victim == nil || full < soonest {
			victim, soonest = e, full
		}
	}
	if victim == nil {
		return
	}
	e := k.ring.prev
	for i := 0; i < seen; i++ {
		prev := e.prev
		if e != victim {
			k.unlink(e)
			k.pushFront(e)
		}
		e = prev
	}
	k.unlink(victim)
	delete(k.byKey, victim.key)
}

// fullAt is when, in unix nanoseconds, every bucket of the meter is full
// again if the key is not used before.
func (m *meter) fullAt() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var at float64
	for _, b := range m.b {
		if b != nil {
			at = max(at, b.fullAt())
		}
	}
	return at
}

func (k *keyedMeters) unlink(e *keyedMeter) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (k *keyedMeters) pushFront(e *keyedMeter) {
	e.prev, e.next = &k.ring, k.ring.next
	k.ring.next.prev = e
	k.ring.next = e
}
