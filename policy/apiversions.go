package policy

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// ClampVersions lowers the versions an ApiVersions response offers to
// those kproxy can read, so clients never send a version whose layout
// kproxy would have to guess at (an acks=0 Produce of an unknown version
// would be taken to expect a response). With hideUnknown (see
// Engine.HidesUnknownAPIs) it also drops the APIs kproxy does not know at
// all, and it drops the APIs in hidden (the SASL APIs while kproxy
// authenticates to the broker itself). It returns frame itself when there
// is nothing to change.
func ClampVersions(frame []byte, version int16, hideUnknown bool, hidden []int16) []byte {
	resp, err := framing.DecodeResponse(frame, framing.KeyApiVersions, version)
	if err != nil || resp == nil {
		return frame
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	changed := false
	keep := r.ApiKeys[:0]
	for _, k := range r.ApiKeys {
		max := framing.MaxVersion(k.ApiKey)
		switch {
		case slices.Contains(hidden, k.ApiKey):
			changed = true
			continue
		case max < 0 && hideUnknown:
			changed = true
			continue
		case max >= 0 && k.MaxVersion > max:
			k.MaxVersion, changed = max, true
		}
		keep = append(keep, k)
	}
	if !changed {
		return frame
	}
	r.ApiKeys = keep
	return EncodeResponse(r, framing.ResponseCorrelationID(frame))
}
