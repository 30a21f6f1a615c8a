package relay

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/policy"
)

// What a client may not do on a connection kproxy logged in itself
// (sasl.upstream): the broker sees kproxy's principal on it, so a request
// that would act as that principal on the credentials themselves is
// refused in the broker's place, never relayed. Hiding these APIs from
// ApiVersions is not enough: a client may send any key.

// errIllegalSaslState is Kafka's ILLEGAL_SASL_STATE.
var errIllegalSaslState = kerr.IllegalSaslState.Code

// originRule names the refusals below in logs, spans and answers.
const originRule = "sasl.upstream"

// Why each kind of request is refused.
const (
	saslRefusal = "kproxy authenticates to the broker itself (sasl.upstream): connect without SASL"
	// A delegation token minted here would be a credential of kproxy's
	// principal that works past every rule and outlives the pod.
	tokenRefusal = "kproxy authenticates to the broker itself (sasl.upstream): delegation tokens would be kproxy's own credentials"
	scramRefusal = "kproxy authenticates to the broker itself (sasl.upstream): a client may not change the credentials of kproxy's own principal"
)

// originRefusal says whether a request with key must be refused on this
// connection, and how: a client's own SASL (ILLEGAL_SASL_STATE, the
// connection is authenticated already), any other API origination hides
// (the delegation token APIs: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, as a
// broker answers on a channel the client did not authenticate), and an
// AlterUserScramCredentials naming kproxy's own principal
// (CLUSTER_AUTHORIZATION_FAILED). The body is decoded only for the last.
func (s *Session) originRefusal(key int16, body *framing.Body) (policy.Verdict, bool) {
	switch {
	case key == framing.KeySaslHandshake || key == framing.KeySaslAuthenticate:
		return policy.Verdict{Rule: originRule, Code: errIllegalSaslState, Reason: saslRefusal}, true
	case key == framing.KeyAlterUserScramCredentials:
		if s.namesOwnUser(body) {
			return policy.Verdict{Rule: originRule, Code: kerr.ClusterAuthorizationFailed.Code, Reason: scramRefusal}, true
		}
		return policy.Verdict{}, false
	}
	for _, k := range s.env.Hidden {
		if k == key {
			return policy.Verdict{Rule: originRule, Code: kerr.DelegationTokenRequestNotAllowed.Code, Reason: tokenRefusal}, true
		}
	}
	return policy.Verdict{}, false
}

// namesOwnUser reports whether an AlterUserScramCredentials request
// deletes or sets credentials of the principal kproxy logged in as. One
// that cannot be read is taken to name it, and so is every one when
// kproxy does not know its principal (an opaque OAUTHBEARER token): kproxy
// cannot tell, and the broker would run it as kproxy.
func (s *Session) namesOwnUser(body *framing.Body) bool {
	if s.upPrincipal == "" {
		return true
	}
	req, err := body.Request()
	r, ok := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if err != nil || !ok {
		return true
	}
	for _, d := range r.Deletions {
		if d.Name == s.upPrincipal {
			return true
		}
	}
	for _, u := range r.Upsertions {
		if u.Name == s.upPrincipal {
			return true
		}
	}
	return false
}

// clusterRefusal refuses, in cluster mode, an API whose answer would name
// brokers or controllers kproxy does not front (the KRaft quorum APIs) or
// that kproxy cannot read: no real address may reach the application.
// A key kproxy cannot answer in closes the connection.
var clusterRefusal = policy.Verdict{Rule: "cluster", Code: kerr.ClusterAuthorizationFailed.Code,
	Reason: "cluster mode: the answer would name brokers or controllers kproxy does not front"}

// refuse answers a request refused by v in the broker's place (origination
// and cluster mode's refusals): the broker never sees it.
func (s *Session) refuse(body *framing.Body, e correlate.Entry, v policy.Verdict, up *Batch, mayWait bool) error {
	req, err := body.Request()
	if err != nil || req == nil {
		s.env.Tracer.Fail(spanOf(e), "kproxy.policy_rejected")
		return PolicyCloseError{v}
	}
	resp, ok := policy.ErrorResponse(req, v.Code)
	if !ok {
		s.env.Tracer.Fail(spanOf(e), "kproxy.policy_rejected")
		return PolicyCloseError{v}
	}
	if a, isAuth := resp.(*kmsg.SASLAuthenticateResponse); isAuth {
		msg := v.Reason
		a.ErrorMessage = &msg
	}
	if sp := spanOf(e); sp != nil {
		sp.Policy(v.Rule, "reject", v.Reason)
	}
	return s.queueResponse(resp, e, v, up, mayWait)
}
