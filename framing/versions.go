package framing

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The API keys kproxy treats specially, as the int16 a request header
// carries. They are kmsg's Key values, so kproxy spells each key once and
// agrees with the library that decodes it; every package compares keys
// against these, never against a number.
const (
	KeyProduce                   = int16(kmsg.Produce)
	KeyFetch                     = int16(kmsg.Fetch)
	KeyControlledShutdown        = int16(kmsg.ControlledShutdown)
	KeyOffsetCommit              = int16(kmsg.OffsetCommit)
	KeyFindCoordinator           = int16(kmsg.FindCoordinator)
	KeyHeartbeat                 = int16(kmsg.Heartbeat)
	KeyJoinGroup                 = int16(kmsg.JoinGroup)
	KeyAlterConfigs              = int16(kmsg.AlterConfigs)
	KeyIncrementalAlterConfigs   = int16(kmsg.IncrementalAlterConfigs)
	KeySaslHandshake             = int16(kmsg.SASLHandshake)
	KeyApiVersions               = int16(kmsg.ApiVersions)
	KeyCreateTopics              = int16(kmsg.CreateTopics)
	KeyDeleteTopics              = int16(kmsg.DeleteTopics)
	KeyTxnOffsetCommit           = int16(kmsg.TxnOffsetCommit)
	KeyDescribeAcls              = int16(kmsg.DescribeACLs)
	KeyCreateAcls                = int16(kmsg.CreateACLs)
	KeyDeleteAcls                = int16(kmsg.DeleteACLs)
	KeySaslAuthenticate          = int16(kmsg.SASLAuthenticate)
	KeyCreatePartitions          = int16(kmsg.CreatePartitions)
	KeyElectLeaders              = int16(kmsg.ElectLeaders)
	KeyDescribeCluster           = int16(kmsg.DescribeCluster)
	KeyAlterUserScramCredentials = int16(kmsg.AlterUserSCRAMCredentials)
	KeyConsumerGroupHeartbeat    = int16(kmsg.ConsumerGroupHeartbeat)
	KeyShareGroupHeartbeat       = int16(kmsg.ShareGroupHeartbeat)
	KeyStreamsGroupHeartbeat     = int16(kmsg.StreamsGroupHeartbeat)
	KeyShareFetch                = int16(kmsg.ShareFetch)
	KeyShareAcknowledge          = int16(kmsg.ShareAcknowledge)
	KeyGetTelemetrySubscriptions = int16(kmsg.GetTelemetrySubscriptions)
	KeyPushTelemetry             = int16(kmsg.PushTelemetry)
)

// apiInfo is what kmsg knows of one API key, flattened into an array at
// start so the hot path does no allocation or map lookup.
type apiInfo struct {
	known    bool
	group    bool // sent to a group coordinator, authorized against a group
	maxVer   int16
	flexFrom int16 // first flexible version; maxVer+1 if never flexible
	name     string
}

var apis = func() (t [kmsg.MaxKey + 1]apiInfo) {
	for k := range t {
		req := kmsg.RequestForKey(int16(k))
		if req == nil {
			continue
		}
		info := apiInfo{known: true, maxVer: req.MaxVersion(), name: kafkaName(kmsg.NameForKey(int16(k)))}
		info.flexFrom = info.maxVer + 1
		_, info.group = req.(kmsg.GroupCoordinatorRequest)
		for v := int16(0); v <= info.maxVer; v++ {
			req.SetVersion(v)
			if req.IsFlexible() {
				info.flexFrom = v
				break
			}
		}
		t[k] = info
	}
	return t
}()

// kafkaName turns kmsg's spelling of an API name into Kafka's own
// ("SASLHandshake" -> "SaslHandshake", "InitProducerID" -> "InitProducerId"),
// which is what operators see in broker docs and write in policies.
var kafkaName = strings.NewReplacer("SASL", "Sasl", "ISR", "Isr", "IDs", "Ids", "ID", "Id",
	"ACLs", "Acls", "SCRAM", "Scram").Replace

// Known reports whether kmsg knows this API key at this version, that is,
// whether its header and body layout can be trusted.
func Known(key, version int16) bool {
	return key >= 0 && int(key) < len(apis) && apis[key].known && version >= 0 && version <= apis[key].maxVer
}

// MaxKey is the highest API key kproxy knows.
const MaxKey = kmsg.MaxKey

// Name returns the Kafka API name for key, or "Unknown".
func Name(key int16) string {
	if key >= 0 && int(key) < len(apis) && apis[key].known {
		return apis[key].name
	}
	return "Unknown"
}

// Flexible reports whether a known key/version uses flexible (compact,
// tagged) encoding.
func Flexible(key, version int16) bool {
	return Known(key, version) && version >= apis[key].flexFrom
}

// RequestHeaderVersion returns 0, 1 or 2 for a known key/version, or -1
// when unknown. Header v0 (no client id) is used only by ControlledShutdown
// v0; flexible versions use v2.
func RequestHeaderVersion(key, version int16) int8 {
	if !Known(key, version) {
		return -1
	}
	if key == KeyControlledShutdown && version == 0 { // v0 has no client id
		return 0
	}
	if Flexible(key, version) {
		return 2
	}
	return 1
}

// ResponseHeaderVersion returns 0 or 1 for a known key/version, or -1.
// ApiVersions responses always use v0 so that any client can read the
// broker's version list.
func ResponseHeaderVersion(key, version int16) int8 {
	if !Known(key, version) {
		return -1
	}
	if key != KeyApiVersions && Flexible(key, version) {
		return 1
	}
	return 0
}

// KeyForName returns the API key of a Kafka API name (as Name spells it).
func KeyForName(name string) (int16, bool) {
	for k := range apis {
		if apis[k].known && apis[k].name == name {
			return int16(k), true
		}
	}
	return 0, false
}

// MaxVersion is the highest version of key kproxy can read, or -1 when the
// key is unknown.
func MaxVersion(key int16) int16 {
	if key < 0 || int(key) >= len(apis) || !apis[key].known {
		return -1
	}
	return apis[key].maxVer
}

// GroupAPI reports whether key is an API a broker authorizes against a
// consumer group (kmsg marks those it sends to a group coordinator).
func GroupAPI(key int16) bool {
	return key >= 0 && int(key) < len(apis) && apis[key].group
}
