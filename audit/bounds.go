package audit

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds on what one line records, so that what a hostile request costs
// is fixed however much it names (a CreateTopics of 100,000 topics keeps
// the first 1000 and a count of the rest): at most maxResources
// resources, maxItems entries in each of a resource's lists, maxString
// bytes of any one string, and about maxLineBytes in all.
const (
	maxResources = 1000
	maxItems     = 1000
	maxString    = 1024
	maxLineBytes = 1 << 20
	// resourceCost is what a resource is charged before its strings: the
	// size of the struct, near enough; entryCost is a config's or map
	// entry's.
	resourceCost = 512
	entryCost    = 96
)

// builder records one request's resources within the bounds. cost is an
// estimate of the line's size in memory, charged as things are kept; it is
// also what the line weighs in the writer's queue.
type builder struct {
	ln   *line
	cost int
	// limit is the line's byte bound: maxLineBytes, or leanLineBytes
	// while the lines awaiting answers hold maxPending already.
	limit int
	// described is how many resources Begin recorded, the ones Settle
	// matches; those Refuse adds after are kproxy's alone.
	described int
}

// expect sizes the resource list for a request naming n, so that a large
// one is allocated once rather than grown.
func (b *builder) expect(n int) {
	if b.ln.Resources == nil {
		b.ln.Resources = make([]resource, 0, min(n, maxResources))
	}
}

// add appends a resource of typ, or counts it in resources_omitted and
// returns nil once the line is full.
func (b *builder) add(typ string) *resource {
	if len(b.ln.Resources) >= maxResources || b.cost+resourceCost > b.max() {
		b.ln.ResourcesOmitted++
		return nil
	}
	b.cost += resourceCost
	b.ln.Resources = append(b.ln.Resources, resource{Type: typ})
	return &b.ln.Resources[len(b.ln.Resources)-1]
}

// keep reports whether the n-th entry (from 0) of one of r's lists, of
// about cost bytes, fits; an entry that does not is counted in r.Omitted.
func (b *builder) keep(r *resource, n, cost int) bool {
	if n >= maxItems || b.cost+cost > b.max() {
		r.Omitted++
		return false
	}
	b.cost += cost
	return true
}

// str is a copy of s that the line may keep (the request's bytes are
// reused once Begin returns), cut to maxString bytes on a rune boundary.
func (b *builder) str(s string) string {
	s = cut(s)
	b.cost += len(s)
	return s
}

// cut copies s, shortened to maxString bytes with a note of how much was
// left off.
func cut(s string) string {
	if len(s) <= maxString {
		return strings.Clone(s)
	}
	i := maxString
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "...(" + strconv.Itoa(len(s)-i) + " more bytes)"
}

// optStr is str for a nullable string: nil stays nil.
func (b *builder) optStr(s *string) *string {
	if s == nil {
		return nil
	}
	v := b.str(*s)
	return &v
}

// topic adds a topic resource named name (or counts it omitted).
func (b *builder) topic(name string) *resource {
	return b.named("topic", name)
}

// named adds a resource of typ called name, matched by both.
func (b *builder) named(typ, name string) *resource {
	r := b.add(typ)
	if r != nil {
		r.Name = b.str(name)
		r.key = rkey{typ, r.Name}
	}
	return r
}

// partitions records a list of partition numbers on r.
func (b *builder) partitions(r *resource, ps []int32) {
	for n, p := range ps {
		if !b.keep(r, n, 4) {
			continue
		}
		r.Partitions = append(r.Partitions, p)
	}
}

// replicas records partition's replica list on r (nil: a cancelled
// reassignment).
func (b *builder) replicas(r *resource, n int, partition int32, list []int32) {
	if !b.keep(r, n, entryCost/2+4*min(len(list), maxItems)) {
		return
	}
	if r.Replicas == nil {
		r.Replicas = make(map[int32][]int32)
	}
	var kept []int32
	if list != nil {
		kept = make([]int32, 0, min(len(list), maxItems))
		for i, id := range list {
			if i == maxItems {
				r.Omitted += len(list) - i
				break
			}
			kept = append(kept, id)
		}
	}
	r.Replicas[partition] = kept
}

// offset records partition's offset on r.
func (b *builder) offset(r *resource, n int, partition int32, offset int64) {
	if !b.keep(r, n, entryCost/2) {
		return
	}
	if r.Offsets == nil {
		r.Offsets = make(map[int32]int64)
	}
	r.Offsets[partition] = offset
}

// config records config name = value on r (redacted if secret), with op
// for the APIs that have one.
func (b *builder) config(r *resource, n int, name string, value *string, op string) {
	if !b.keep(r, n, entryCost) {
		return
	}
	if r.Configs == nil {
		r.Configs = make(map[string]*string)
	}
	k := b.str(name)
	r.Configs[k] = b.configValue(name, value)
	if op != "" {
		if r.Ops == nil {
			r.Ops = make(map[string]string)
		}
		r.Ops[k] = op
	}
}

// max is the line's byte bound.
func (b *builder) max() int {
	if b.limit > 0 {
		return b.limit
	}
	return maxLineBytes
}
