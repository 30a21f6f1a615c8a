package audit

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// Conn is who sent a request: the client's address, the principal of its
// verified TLS certificate, the SASL principal kproxy logs in to the
// broker as (sasl.upstream), and its client.id.
type Conn struct {
	Client, Principal, UpstreamPrincipal, ClientID string
}

// timeLayout is RFC 3339 in UTC with milliseconds, a fixed width that
// sorts as text.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// Pending is one request's line, waiting for its outcome. Exactly one of
// Settle, Unknown and Refused finishes it and hands it to the writer;
// calls after that do nothing. Its methods lock, so the goroutine that
// read the request and the one that reads the response (or closes the
// connection) may each call it. A nil *Pending does nothing.
type Pending struct {
	mu     sync.Mutex
	log    *Log
	b      builder
	done   bool
	byName map[string][]int // resources by name and id, for Refuse; built on its first call
	// refusedOmitted counts refusals of resources that were left off the
	// line, so the outcome still counts them.
	refusedOmitted int
	// rule and message are the last refusal's, copied once and shared by
	// every resource it covers.
	rule, message string
	// refusal: a refused request of an API that changes nothing, whose
	// line may fill only part of the queue. charged is what Begin added
	// to the log's pending bytes, given back when the line is finished.
	refusal bool
	charged int
}

// Begin starts the line of a request about to be relayed or refused; nil
// when l does not audit key. req is the request as decoded (nil if it
// could not be): every string kept is copied, and req is not retained.
func (l *Log) Begin(c Conn, key, version int16, req kmsg.Request) *Pending {
	if !l.Audits(key) {
		return nil
	}
	return l.begin(c, key, version, req)
}

// BeginRefusal starts the line of a request of any API that a policy
// refused in whole or in part, audited or not (a refused Produce or
// JoinGroup): nil only when l is. For APIs outside ChangesCluster it
// records what the request names (groups, transactional ids, topics and
// partitions), never what it carries (records, offsets' metadata, SASL
// bytes). Finish it with Refused, or Refuse each refused resource and
// Settle with the broker's answer for the rest.
func (l *Log) BeginRefusal(c Conn, key, version int16, req kmsg.Request) *Pending {
	if l == nil {
		return nil
	}
	p := l.begin(c, key, version, req)
	p.refusal = !l.Audits(key)
	return p
}

func (l *Log) begin(c Conn, key, version int16, req kmsg.Request) *Pending {
	p := &Pending{log: l}
	p.b.ln = &line{
		Time:              l.now().UTC().Format(timeLayout),
		Pod:               l.env.Pod,
		Namespace:         l.env.Namespace,
		Client:            cut(c.Client),
		Principal:         cut(c.Principal),
		UpstreamPrincipal: cut(c.UpstreamPrincipal),
		ClientID:          cut(c.ClientID),
		API:               framing.Name(key),
		Version:           version,
	}
	p.b.cost = resourceCost + len(p.b.ln.Client) + len(p.b.ln.Principal) + len(p.b.ln.UpstreamPrincipal) + len(p.b.ln.ClientID)
	if l.pending.Load() > maxPending {
		p.b.limit = leanLineBytes
	}
	if req != nil {
		describe(&p.b, req)
	}
	p.charged = p.b.cost
	l.pending.Add(int64(p.charged))
	return p
}

// Refuse records that kproxy refused one resource (a topic, a config
// resource's name) under rule, with POLICY_VIOLATION; the rest of the
// request still goes to the broker.
func (p *Pending) Refuse(resource, rule, message string) {
	p.RefuseCode(resource, rule, kerr.PolicyViolation.Code, message)
}

// RefuseCode is Refuse with the error code the client was answered with.
// It marks every recorded resource of that name (or topic id).
func (p *Pending) RefuseCode(resource, rule string, code int16, message string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	if p.byName == nil {
		p.byName = make(map[string][]int, len(p.b.ln.Resources))
		for i, r := range p.b.ln.Resources {
			if r.Name != "" {
				p.byName[r.Name] = append(p.byName[r.Name], i)
			}
			if r.ID != "" && r.ID != r.Name {
				p.byName[r.ID] = append(p.byName[r.ID], i)
			}
		}
	}
	if len(resource) > maxString {
		resource = cut(resource) // as the resource's name was
	}
	idx, ok := p.byName[resource]
	if !ok {
		// Most likely one the line left off; else one the relay names
		// otherwise (a topic id it resolved), recorded if there is room.
		if p.b.ln.ResourcesOmitted > 0 {
			p.refusedOmitted++
			return
		}
		r := p.b.add(p.unmatchedType())
		if r == nil {
			p.b.ln.ResourcesOmitted-- // add counted it; refusedOmitted does
			p.refusedOmitted++
			return
		}
		r.Name = p.b.str(resource)
		idx = []int{len(p.b.ln.Resources) - 1}
		p.byName[resource] = idx
	}
	if rule != p.rule || p.rule == "" {
		p.rule = p.b.str(rule)
	}
	if message != p.message || p.message == "" {
		p.message = p.b.str(message)
	}
	for _, i := range idx {
		r := &p.b.ln.Resources[i]
		r.refused = true
		r.Outcome = codeName(code)
		r.Rule, r.Message = p.rule, p.message
	}
}

// unmatchedType is the type given to a refused resource that Begin did
// not record: that of the others when they are all of one type.
func (p *Pending) unmatchedType() string {
	t := ""
	for _, r := range p.b.ln.Resources {
		if t != "" && r.Type != t {
			return "resource"
		}
		t = r.Type
	}
	if t == "" {
		return "resource"
	}
	return t
}

// Refused finishes a request kproxy refused whole, with no broker answer:
// every resource takes code and rule, and the line's outcome is refused.
func (p *Pending) Refused(rule string, code int16, reason string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	ln := p.b.ln
	ln.Outcome = outcomeRefused
	ln.Error = codeName(code)
	ln.Rule = p.b.str(rule)
	ln.Message = p.b.str(reason)
	for i := range ln.Resources {
		r := &ln.Resources[i]
		if !r.refused {
			r.Outcome, r.Rule = ln.Error, ln.Rule
		}
	}
	p.finish()
}

// Unknown finishes a request whose connection closed before the broker
// answered: every resource kproxy did not refuse is unknown.
func (p *Pending) Unknown() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.b.ln.Outcome = outcomeUnknown
	for i := range p.b.ln.Resources {
		if r := &p.b.ln.Resources[i]; !r.refused {
			r.Outcome = outcomeUnknown
		}
	}
	p.finish()
}

// Settle finishes a request with the broker's response, as the client
// gets it: each resource takes its entry's error code name (resources
// kproxy refused keep their refusal), and the line is ok, partial or
// error. A nil resp is Unknown.
func (p *Pending) Settle(resp kmsg.Response) {
	if p == nil {
		return
	}
	if resp == nil {
		p.Unknown()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	s := newSettler(&p.b)
	s.extraErr = p.refusedOmitted
	settle(s, resp)
	p.b.ln.Outcome = s.outcome()
	p.finish()
}

// finish hands the line to the writer; p.mu is held.
func (p *Pending) finish() {
	p.done = true
	p.byName = nil
	p.log.pending.Add(-int64(p.charged))
	p.log.enqueue(p.b.ln, p.b.cost, p.refusal)
}

// NameTopic gives the resources a request named only by topic id (Produce
// v13+) the name kproxy learnt for that id, so the line can be found by
// name.
func (p *Pending) NameTopic(id [16]byte, name string) {
	if p == nil || name == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	want := uuid(id)
	for i := range p.b.ln.Resources {
		if r := &p.b.ln.Resources[i]; r.Type == "topic" && r.Name == "" && r.ID == want {
			r.Name = p.b.str(name)
		}
	}
}
