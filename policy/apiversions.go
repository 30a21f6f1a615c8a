package policy

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// ClampVersions lowers the versions an ApiVersions response offers to
// those kproxy can read, so clients never send a version whose layout
// kproxy would have to guess at (an acks=0 Produce of an unknown version
// would be taken to expect a response). It returns frame itself when there
// is nothing to lower.
func ClampVersions(frame []byte, version int16) []byte {
	resp, err := framing.DecodeResponse(frame, framing.KeyApiVersions, version)
	if err != nil || resp == nil {
		return frame
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	changed := false
	for i := range r.ApiKeys {
		k := &r.ApiKeys[i]
		if max := framing.MaxVersion(k.ApiKey); max >= 0 && k.MaxVersion > max {
			k.MaxVersion, changed = max, true
		}
	}
	if !changed {
		return frame
	}
	return EncodeResponse(r, framing.ResponseCorrelationID(frame))
}
