package policy

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// A broker newer than kproxy offers versions kproxy cannot read; the
// relayed ApiVersions answer offers only what kproxy knows.
func TestClampVersions(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	known := framing.MaxVersion(0)
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MinVersion: 3, MaxVersion: known + 5},
		{ApiKey: 1, MinVersion: 4, MaxVersion: 2},
		{ApiKey: 30000, MinVersion: 0, MaxVersion: 9}, // unknown key: left alone
	}
	frame := EncodeResponse(resp, 5)
	out := ClampVersions(frame, 3, false, nil, nil)
	back, err := framing.DecodeResponse(out, framing.KeyApiVersions, 3)
	if err != nil || framing.ResponseCorrelationID(out) != 5 {
		t.Fatalf("clamped answer: %v", err)
	}
	keys := back.(*kmsg.ApiVersionsResponse).ApiKeys
	if keys[0].MaxVersion != known || keys[1].MaxVersion != 2 || keys[2].MaxVersion != 9 {
		t.Fatalf("versions %+v, want Produce at %d, the rest unchanged", keys, known)
	}
	// Nothing to lower: the frame comes back as it was.
	resp.ApiKeys = resp.ApiKeys[1:2]
	same := EncodeResponse(resp, 6)
	if got := ClampVersions(same, 3, false, nil, nil); &got[0] != &same[0] {
		t.Fatal("an answer needing no change was re-encoded")
	}
}

// Under a rule that would refuse them (see Engine.HidesUnknownAPIs), the
// APIs kproxy does not know leave the answer, so clients never send them.
func TestClampVersionsHidesUnknownAPIs(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MinVersion: 3, MaxVersion: 5},
		{ApiKey: kmsg.MaxKey + 1, MinVersion: 0, MaxVersion: 1},
		{ApiKey: 18, MinVersion: 0, MaxVersion: 3},
		{ApiKey: 30000, MinVersion: 0, MaxVersion: 9},
	}
	out := ClampVersions(EncodeResponse(resp, 5), 3, true, nil, nil)
	back, err := framing.DecodeResponse(out, framing.KeyApiVersions, 3)
	if err != nil {
		t.Fatal(err)
	}
	var keys []int16
	for _, k := range back.(*kmsg.ApiVersionsResponse).ApiKeys {
		keys = append(keys, k.ApiKey)
	}
	if len(keys) != 2 || keys[0] != 0 || keys[1] != 18 {
		t.Fatalf("keys offered %v, want [0 18]", keys)
	}
}

// TestClampVersionsHides: the APIs kproxy keeps from clients (the SASL
// ones while it authenticates to the broker itself) are left out.
func TestClampVersionsHides(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	for _, k := range []int16{0, 17, 18, 36, 38} {
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: 1})
	}
	out := ClampVersions(EncodeResponse(resp, 9), 3, false, []int16{17, 36, 38}, nil)
	got, err := framing.DecodeResponse(out, framing.KeyApiVersions, 3)
	if err != nil {
		t.Fatal(err)
	}
	var keys []int16
	for _, k := range got.(*kmsg.ApiVersionsResponse).ApiKeys {
		keys = append(keys, k.ApiKey)
	}
	if !slices.Equal(keys, []int16{0, 18}) {
		t.Fatalf("offered %v, want [0 18]", keys)
	}
}
