// This file holds the relay's side of the audit log: a line begun for
// each request that changes cluster state, and for each request a policy
// refuses, finished with the broker's answer, kproxy's refusal, or
// "unknown" when the connection closes first. The audit package writes
// it, off the relay's goroutines.

package relay

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/audit"
	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// auditBegin starts the line of a request of an audited API; nil when the
// log is off or the API is not audited (the common case costs a nil
// check and an array read).
func (s *Session) auditBegin(h framing.RequestHeader, body *framing.Body) *audit.Pending {
	l := s.env.Audit
	if !l.Audits(h.APIKey) {
		return nil
	}
	req, _ := body.Request()
	return l.Begin(s.auditConn(h), h.APIKey, h.APIVersion, req)
}

// auditRefusal records a policy refusal on p, begun here for an API the
// log does not audit otherwise: every item a content rule refused, and,
// when nothing of the request goes on (whole), the request's refusal,
// which finishes the line.
func (s *Session) auditRefusal(p *audit.Pending, h framing.RequestHeader, body *framing.Body, v policy.Verdict, whole bool) *audit.Pending {
	if s.env.Audit == nil {
		return nil
	}
	if p == nil {
		req, _ := body.Request()
		p = s.env.Audit.BeginRefusal(s.auditConn(h), h.APIKey, h.APIVersion, req)
		if pr, ok := req.(*kmsg.ProduceRequest); ok { // v13+ names topics by id
			for i := range pr.Topics {
				if pr.Topics[i].Topic == "" {
					p.NameTopic(pr.Topics[i].TopicID, s.env.Topics.Name(pr.Topics[i].TopicID))
				}
			}
		}
	}
	for i := range v.Refusals {
		it := &v.Refusals[i]
		p.RefuseCode(auditName(it.Topic, it.TopicID), v.Rule, it.Code, it.Message)
	}
	for _, part := range v.Partitions { // size and access refusals of some partitions
		p.RefuseCode(auditName(part.Topic, part.TopicID), v.Rule, v.Code, v.Reason)
	}
	if whole {
		p.Refused(v.Rule, v.Code, v.Reason)
		return nil
	}
	return p
}

func (s *Session) auditConn(h framing.RequestHeader) audit.Conn {
	return audit.Conn{Client: s.client, Principal: s.conn.Identity.Name(), UpstreamPrincipal: s.upPrincipal,
		ClientID: string(h.ClientID)}
}

// withAudit sets e's line, leaving it nil (not a typed nil) when there is
// none, as correlate asks.
func withAudit(e *correlate.Entry, p *audit.Pending) {
	if p != nil {
		e.Audit = p
	} else {
		e.Audit = nil
	}
}

// auditSettle finishes an entry's line with the response as the client
// gets it (refused items added back). Audited APIs are admin requests,
// rare and small: decoding their answer where the relay runs costs no
// other connection anything.
func auditSettle(e correlate.Entry, frame []byte) {
	p, _ := e.Audit.(*audit.Pending)
	if p == nil {
		return
	}
	resp, err := framing.DecodeResponse(frame, e.APIKey, e.APIVersion)
	if err != nil {
		p.Unknown()
		return
	}
	p.Settle(resp)
}

// auditUnknown finishes the line of an entry whose answer never came.
func auditUnknown(e correlate.Entry) {
	if p, _ := e.Audit.(*audit.Pending); p != nil {
		p.Unknown()
	}
}

// auditName is how the line named a topic: by name, or by id when the
// request named it so (Produce v13+).
func auditName(topic string, id [16]byte) string {
	if topic == "" {
		return audit.TopicID(id)
	}
	return topic
}
