package policy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// The APIs kproxy answers itself are offered at v0 whether the broker
// offers them (at other versions) or not; an error answer is left alone.
func TestClampVersionsOffers(t *testing.T) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 0, MinVersion: 3, MaxVersion: 11},
		{ApiKey: 72, MinVersion: 0, MaxVersion: 3}, // a broker newer than kproxy
		{ApiKey: 18, MinVersion: 0, MaxVersion: 4},
	}
	out := ClampVersions(EncodeResponse(resp, 7), 3, false, nil, []int16{71, 72})
	back, err := framing.DecodeResponse(out, framing.KeyApiVersions, 3)
	if err != nil || framing.ResponseCorrelationID(out) != 7 {
		t.Fatalf("offered answer: %v", err)
	}
	got := map[int16][2]int16{}
	for _, k := range back.(*kmsg.ApiVersionsResponse).ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	want := map[int16][2]int16{0: {3, 11}, 18: {0, 4}, 71: {0, 0}, 72: {0, 0}}
	if len(got) != len(want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %d offered at %v, want %v", k, got[k], v)
		}
	}
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = resp.ApiKeys[:1] // nothing to clamp: only the offer could change it
	frame := EncodeResponse(resp, 8)
	if same := ClampVersions(frame, 3, false, nil, []int16{71, 72}); &same[0] != &frame[0] {
		t.Fatal("an error answer was changed")
	}
}
