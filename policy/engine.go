// This file holds the Engine itself: compiling a validated Config into
// rules (New), and the questions the relay asks of a rule set before any
// request (MayThrottle, MaxFrame, HidesUnknownAPIs, Empty). What a rule
// does with a request lives in check.go, select.go, limits.go and
// refusal_codes.go.

package policy

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/kproxy/kproxy/framing"
)

// Engine is a compiled, immutable set of rules plus their buckets. A
// reload builds a new Engine; live connections pick it up on their next
// request.
type Engine struct {
	rules []*rule
	// minFrame is the smallest max_request_bytes of a header-only rule:
	// frames above it are checked from their header, before the body is
	// read (see CheckOversize). 0 when there is none.
	minFrame int
	// throttles is set when some rule can give a Throttle verdict.
	throttles bool
	// refusesUnknownAPIs is set when a reject rule can select an API
	// kproxy does not know (see HidesUnknownAPIs).
	refusesUnknownAPIs bool
	// readsRecords is set when a content rule judges produced records
	// (see ReadsRecords).
	readsRecords bool
}

// ReadsRecords reports whether a rule may decompress a Produce's batches
// to judge its records: such produces must then not be judged on the
// poller.
func (e *Engine) ReadsRecords() bool { return e != nil && e.readsRecords }

// A content rule's violations are logged at most reportsPerSecond per
// rule, in bursts of reportBurst: a misconfigured producer breaking a
// rule a thousand times a second must not flood the log.
const (
	reportsPerSecond = 1
	reportBurst      = 5
)

// HidesUnknownAPIs reports whether the ApiVersions answers relayed under
// this rule set must drop the APIs kproxy does not know. A reject rule
// that selects every API, or every API but some, selects those too (under
// a topic rule they may name any topic), and kproxy, which cannot write
// an answer in a layout it does not know, could only refuse one by
// closing the connection; a client told the broker lacks the API never
// sends it. Without such a rule they stay on offer and are relayed
// untouched.
func (e *Engine) HidesUnknownAPIs() bool { return e != nil && e.refusesUnknownAPIs }

type rule struct {
	Rule
	engine *Engine
	apis   [framing.MaxKey + 1]bool
	anyAPI bool
	// exceptAPIs: the rule lists the APIs it does not select, so it
	// selects those kproxy does not know too.
	exceptAPIs bool
	clientID   glob
	principal  glob
	exceptPrin []glob
	topics     []glob
	except     []glob
	m          ruleMetrics
	// The require block's compiled globs and counter, and the bound on
	// the log lines its violations make.
	topicName, groupID glob
	viol               *prometheus.CounterVec
	reports            *rate.Limiter

	mu     sync.Mutex
	shared *meter       // key: rule
	byKey  *keyedMeters // key: client_id or topic
}

// New compiles a validated Config.
func New(c Config, m *Metrics) *Engine {
	e := &Engine{}
	for _, r := range c.Rules {
		cr := &rule{Rule: r, engine: e, anyAPI: len(r.Match.APIs) == 0,
			byKey: newKeyedMeters(maxKeyedMeters)}
		for _, name := range r.Match.APIs {
			k, _ := framing.KeyForName(name)
			cr.apis[k] = true
		}
		cr.clientID = compileGlob(r.Match.ClientID)
		cr.principal = compileGlob(r.Match.Principal)
		for _, p := range r.Match.ExceptPrincipals {
			cr.exceptPrin = append(cr.exceptPrin, compileGlob(p))
		}
		for _, t := range r.Match.Topics {
			cr.topics = append(cr.topics, compileGlob(t))
		}
		for _, t := range r.Match.ExceptTopics {
			cr.except = append(cr.except, compileGlob(t))
		}
		if len(r.Match.ExceptAPIs) > 0 {
			cr.anyAPI, cr.exceptAPIs = false, true
			for k := range cr.apis {
				cr.apis[k] = true
			}
			for _, name := range r.Match.ExceptAPIs {
				k, _ := framing.KeyForName(name)
				cr.apis[k] = false
			}
		}
		cr.m = ruleMetrics{m.matched.WithLabelValues(r.Name), m.throttled.WithLabelValues(r.Name),
			m.rejected.WithLabelValues(r.Name), m.logged.WithLabelValues(r.Name), m.delay.WithLabelValues(r.Name),
			m.closed.WithLabelValues(r.Name)}
		if r.Require != nil {
			cr.topicName, cr.groupID = compileGlob(r.Require.TopicName), compileGlob(r.Require.GroupID)
			cr.viol, cr.reports = m.violations, rate.NewLimiter(reportsPerSecond, reportBurst)
			if r.Require.readsRecords() && (cr.anyAPI || cr.apis[framing.KeyProduce]) {
				e.readsRecords = true
			}
		}
		e.rules = append(e.rules, cr)
		if r.Action == ActionThrottle || r.Action == ActionReject && r.Limits.rates() {
			e.throttles = true // a rate rule rejects Fetch by throttling it
		}
		if l := r.Limits.MaxRequestBytes; l > 0 && !cr.byTopic() && (e.minFrame == 0 || l < e.minFrame) {
			e.minFrame = l
		}
		if r.Action == ActionReject && (cr.anyAPI || cr.exceptAPIs) {
			e.refusesUnknownAPIs = true
		}
	}
	return e
}

// MayThrottle reports whether Check can return Throttle. A relay that
// cannot pause a client (kproxy's poller path) takes only rule sets that
// do not.
func (e *Engine) MayThrottle() bool { return e != nil && e.throttles }

// MaxFrame is the frame size above which CheckOversize must see the
// request before its body is read; 0 when no rule limits frame sizes.
func (e *Engine) MaxFrame() int {
	if e == nil {
		return 0
	}
	return e.minFrame
}

// Empty reports whether there are no rules, so the relay can skip Check.
func (e *Engine) Empty() bool { return e == nil || len(e.rules) == 0 }

func (e *Engine) rule(name string) *rule {
	for _, r := range e.rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}
