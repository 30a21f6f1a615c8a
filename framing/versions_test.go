package framing_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// TestNameKafkaSpellings pins the names operators write in policies, which
// follow Kafka's spelling, not kmsg's.
func TestNameKafkaSpellings(t *testing.T) {
	want := map[int16]string{
		0: "Produce", 3: "Metadata", 4: "LeaderAndIsr", 17: "SaslHandshake",
		18: "ApiVersions", 22: "InitProducerId", 29: "DescribeAcls", 30: "CreateAcls",
		31: "DeleteAcls", 36: "SaslAuthenticate", 50: "DescribeUserScramCredentials",
		51: "AlterUserScramCredentials", 67: "AllocateProducerIds",
		-1: "Unknown", kmsg.MaxKey + 1: "Unknown", 0x7fff: "Unknown",
	}
	for k, name := range want {
		if got := framing.Name(k); got != name {
			t.Errorf("Name(%d) = %q, want %q", k, got, name)
		}
	}
}

// TestNameEveryKey checks every key: same letters as kmsg's name, only the
// case of acronyms changed, and no all-caps acronym left.
func TestNameEveryKey(t *testing.T) {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		got := framing.Name(k)
		if !strings.EqualFold(got, kmsg.NameForKey(k)) {
			t.Errorf("Name(%d) = %q, kmsg says %q", k, got, kmsg.NameForKey(k))
		}
		for _, acr := range []string{"SASL", "ACL", "ISR", "SCRAM", "ID"} {
			if strings.Contains(got, acr) {
				t.Errorf("Name(%d) = %q keeps %q", k, got, acr)
			}
		}
	}
	if framing.MaxKey != kmsg.MaxKey {
		t.Fatalf("MaxKey %d, kmsg %d", framing.MaxKey, kmsg.MaxKey)
	}
}

// TestVersionTables compares Known, Flexible and both header versions with
// kmsg for every key and version, and one past the newest.
func TestVersionTables(t *testing.T) {
	for k := int16(0); k <= kmsg.MaxKey; k++ {
		req := kmsg.RequestForKey(k)
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req.SetVersion(v)
			if !framing.Known(k, v) {
				t.Fatalf("Known(%d, %d) false", k, v)
			}
			if framing.Flexible(k, v) != req.IsFlexible() {
				t.Fatalf("Flexible(%d, %d) = %v, kmsg %v", k, v, framing.Flexible(k, v), req.IsFlexible())
			}
			if got, want := framing.RequestHeaderVersion(k, v), wantReqHeaderVersion(req); got != want {
				t.Fatalf("RequestHeaderVersion(%d, %d) = %d, want %d", k, v, got, want)
			}
			wantResp := int8(0)
			if req.IsFlexible() && k != 18 {
				wantResp = 1
			}
			if got := framing.ResponseHeaderVersion(k, v); got != wantResp {
				t.Fatalf("ResponseHeaderVersion(%d, %d) = %d, want %d", k, v, got, wantResp)
			}
		}
		past := req.MaxVersion() + 1
		if framing.Known(k, past) || framing.Flexible(k, past) ||
			framing.RequestHeaderVersion(k, past) != -1 || framing.ResponseHeaderVersion(k, past) != -1 {
			t.Fatalf("key %d v%d (newer than kmsg) treated as known", k, past)
		}
		if framing.Known(k, -1) {
			t.Fatalf("Known(%d, -1)", k)
		}
	}
	for _, k := range []int16{-1, kmsg.MaxKey + 1, 0x7fff, -0x8000} {
		if framing.Known(k, 0) || framing.RequestHeaderVersion(k, 0) != -1 || framing.ResponseHeaderVersion(k, 0) != -1 {
			t.Fatalf("unknown key %d treated as known", k)
		}
	}
	// SaslHandshake is never flexible; ApiVersions v3+ is, on requests only.
	for v := int16(0); v <= kmsg.NewPtrSASLHandshakeRequest().MaxVersion(); v++ {
		if framing.Flexible(framing.KeySaslHandshake, v) {
			t.Fatalf("SaslHandshake v%d flexible", v)
		}
	}
	if framing.RequestHeaderVersion(framing.KeyApiVersions, 3) != 2 || framing.ResponseHeaderVersion(framing.KeyApiVersions, 3) != 0 {
		t.Fatal("ApiVersions v3 header versions wrong")
	}
}
