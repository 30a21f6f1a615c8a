package policy

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// TestClampVersionsHidesAtEveryVersion: the hidden APIs are left out of
// the ApiVersions answer at every version a client may ask in, flexible
// (v3+, whose answer still has header v0) or not.
func TestClampVersionsHidesAtEveryVersion(t *testing.T) {
	for v := int16(0); v <= kmsg.NewPtrApiVersionsRequest().MaxVersion(); v++ {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = v
		for _, k := range []int16{0, 3, 17, 18, 36, 38, 39, 40, 41} {
			resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MaxVersion: 1})
		}
		out := ClampVersions(EncodeResponse(resp, 9), v, false, []int16{17, 36, 38, 39, 40, 41}, nil)
		got, err := framing.DecodeResponse(out, framing.KeyApiVersions, v)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		var keys []int16
		for _, k := range got.(*kmsg.ApiVersionsResponse).ApiKeys {
			keys = append(keys, k.ApiKey)
		}
		if len(keys) != 3 || keys[0] != 0 || keys[1] != 3 || keys[2] != 18 {
			t.Errorf("v%d: offered %v, want [0 3 18]", v, keys)
		}
	}
}
