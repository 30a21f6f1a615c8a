// This file holds rule selection: whether a rule's selector (APIs,
// client id, listener, principal, topics) matches a request. Selection
// fails closed: a topic kproxy cannot name may be any topic, so every
// topic rule selects it.

package policy

import (
	"github.com/kproxy/kproxy/framing"
	"strings"
)

// selects reports whether a rule's selector matches the request.
func (ru *rule) selects(r *Request, body *framing.Body) bool {
	switch {
	case ru.anyAPI:
	case r.Key < 0 || int(r.Key) >= len(ru.apis):
		if !ru.exceptAPIs { // a key kproxy does not know is in no list
			return false
		}
	case !ru.apis[r.Key]:
		return false
	}
	if ru.Match.ClientID != "" && !ru.clientID.match(r.ClientID) {
		return false
	}
	if ru.Match.Listener != "" && ru.Match.Listener != r.Listener {
		return false
	}
	if ru.Match.Principal != "" && !ru.matchPrincipal(r.Conn) {
		return false
	}
	if len(ru.exceptPrin) > 0 && ru.exceptsPrincipal(r.Conn) {
		return false
	}
	if len(ru.topics) > 0 || len(ru.except) > 0 {
		return ru.matchTopics(r, body) != noTopic
	}
	return true
}

// matchPrincipal reports whether the connection's identity matches the
// rule's principal glob; a connection without one matches none.
func (ru *rule) matchPrincipal(c *ConnState) bool {
	return c != nil && ru.principalMatches(c.Identity, ru.principal, ru.Match.Principal)
}

// exceptsPrincipal reports whether the connection's identity is in the
// rule's except_principals; a connection without one is in no list.
func (ru *rule) exceptsPrincipal(c *ConnState) bool {
	if c == nil {
		return false
	}
	for i, g := range ru.exceptPrin {
		if ru.principalMatches(c.Identity, g, ru.Match.ExceptPrincipals[i]) {
			return true
		}
	}
	return false
}

// principalMatches applies glob g (written as pattern) to id. A spiffe://
// glob matches the certificate's SPIFFE ID only (Identity.SPIFFE: one URI
// SAN, never the CN); any other glob matches the names principal_source
// says: uri the URI SANs, cn the CN, any both, and by default the URI
// SANs when there are any, else the CN.
func (ru *rule) principalMatches(id Identity, g glob, pattern string) bool {
	if strings.HasPrefix(pattern, spiffeScheme) {
		s := id.SPIFFE()
		return s != "" && g.match(s)
	}
	uris, cn := true, true
	switch ru.Match.PrincipalSource {
	case SourceURI:
		cn = false
	case SourceCN:
		uris = false
	case SourceAny:
	default:
		cn = len(id.URIs) == 0
		uris = !cn
	}
	if uris {
		for _, u := range id.URIs {
			if g.match(u) {
				return true
			}
		}
	}
	return cn && id.CN != "" && g.match(id.CN)
}

// byTopic reports whether the rule selects by topic (and so needs bodies).
func (ru *rule) byTopic() bool { return len(ru.topics) > 0 || len(ru.except) > 0 }

// topicSelected applies the rule's topic globs and exceptions to a name.
// A topic kproxy cannot name may be any topic: every topic rule selects
// it, so that a rule fails closed, never open.
func (ru *rule) topicSelected(topic string) bool {
	if topic == framing.UnknownTopic {
		return true
	}
	for _, g := range ru.except {
		if g.match(topic) {
			return false
		}
	}
	if len(ru.topics) == 0 {
		return len(ru.except) > 0
	}
	for _, g := range ru.topics {
		if g.match(topic) {
			return true
		}
	}
	return false
}

// topicMatch is how a request's topics meet a rule's topic selector.
type topicMatch uint8

const (
	noTopic      topicMatch = iota // no topic selected
	unknownTopic                   // only topics kproxy cannot name
	namedTopic                     // a topic selected by its name
)

// matchTopics reports whether the request names a topic the rule selects.
// A body kproxy cannot read (a version kmsg does not know, or a malformed
// one) of an API that can name topics, or of an API kproxy does not know,
// counts as naming an unknown topic.
func (ru *rule) matchTopics(r *Request, body *framing.Body) topicMatch {
	req, err := body.Request()
	if err != nil || req == nil {
		if framing.NamesTopics(r.Key) {
			return unknownTopic
		}
		return noTopic
	}
	m := noTopic
	framing.EachTopic(req, r.Topics, func(topic string, _ int32) bool {
		switch {
		case topic == framing.UnknownTopic:
			m = unknownTopic
		case ru.topicSelected(topic):
			m = namedTopic
		}
		return m != namedTopic
	})
	return m
}
