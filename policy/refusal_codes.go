// This file holds the Kafka error codes a refusal answers with, and how
// one is chosen for a request as a broker would choose it, so that a
// client reacts to kproxy's refusal as it would to the broker's own.

package policy

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// Kafka error codes a refusal uses, taken from kerr so that each is the
// very code a broker sends (kerr's errors are variables, so these are
// too; nothing assigns them).
var (
	// codeMessageTooLarge is MESSAGE_TOO_LARGE, the broker's answer to a
	// batch over its size.
	codeMessageTooLarge      = kerr.MessageTooLarge.Code
	codeTopicAuthorization   = kerr.TopicAuthorizationFailed.Code
	codeGroupAuthorization   = kerr.GroupAuthorizationFailed.Code
	codeClusterAuthorization = kerr.ClusterAuthorizationFailed.Code
	codePolicyViolation      = kerr.PolicyViolation.Code
	codeThrottlingQuota      = kerr.ThrottlingQuotaExceeded.Code
	codeUnknownTopicID       = kerr.UnknownTopicID.Code
	// The codes of content rules' violations (require_*.go).
	codeInvalidRequiredAcks   = kerr.InvalidRequiredAcks.Code
	codeUnsupportedCodec      = kerr.UnsupportedCompressionType.Code
	codeInvalidRecord         = kerr.InvalidRecord.Code
	codeInvalidGroupID        = kerr.InvalidGroupID.Code
	codeInvalidSessionTimeout = kerr.InvalidSessionTimeout.Code
	codeRequestTimedOut       = kerr.RequestTimedOut.Code
)

// refusalCode is the Kafka error a refused request gets, as a broker
// would choose it: for access rules, TOPIC_AUTHORIZATION_FAILED when the
// rule is about topics (UNKNOWN_TOPIC_ID when only topics named by ids
// kproxy has not learnt made it match: the client then refreshes its
// metadata through kproxy, which learns the ids, and retries under the
// rule; CLUSTER_AUTHORIZATION_FAILED when only an ACL filter or pattern, a
// null ElectLeaders list or a broker-only API did, as no id learnt would
// name them), GROUP_AUTHORIZATION_FAILED for group APIs,
// TOPIC_AUTHORIZATION_FAILED for other requests naming topics, and
// CLUSTER_AUTHORIZATION_FAILED otherwise (ACL, ElectLeaders and
// broker-only APIs too, which a broker authorizes against the cluster);
// over a rate, the quota
// error for the topic-creation APIs in the versions that know it
// (KIP-599), else POLICY_VIOLATION; over a size, MESSAGE_TOO_LARGE for
// Produce.
func refusalCode(ru *rule, r *Request, body *framing.Body) int16 {
	switch {
	case ru.Limits.sizes() && r.Key == framing.KeyProduce:
		return codeMessageTooLarge
	case ru.Limits.any():
		if (r.Key == framing.KeyCreateTopics && r.Version >= 6) || (r.Key == framing.KeyDeleteTopics && r.Version >= 5) ||
			(r.Key == framing.KeyCreatePartitions && r.Version >= 3) {
			return codeThrottlingQuota
		}
		return codePolicyViolation
	case ru.byTopic():
		switch {
		case ru.matchTopics(r, body) != unknownTopic:
			return codeTopicAuthorization
		case clusterAPI(r.Key):
			return codeClusterAuthorization // no id learnt would name it
		}
		return codeUnknownTopicID
	case framing.GroupAPI(r.Key):
		return codeGroupAuthorization
	case clusterAPI(r.Key):
		return codeClusterAuthorization
	}
	if req, _ := body.Request(); req != nil && hasTopics(req, r.Topics) {
		return codeTopicAuthorization
	}
	return codeClusterAuthorization
}

// clusterAPI reports the APIs a broker authorizes against the cluster
// although they can be about topics: the ACL APIs, ElectLeaders and those
// only brokers send each other.
func clusterAPI(key int16) bool {
	switch key {
	case framing.KeyDescribeAcls, framing.KeyCreateAcls, framing.KeyDeleteAcls, framing.KeyElectLeaders:
		return true
	}
	return framing.BrokerOnly(key)
}

func hasTopics(req kmsg.Request, ids *framing.TopicIDs) bool {
	named := false
	framing.EachTopic(req, ids, func(string, int32) bool { named = true; return false })
	return named
}
