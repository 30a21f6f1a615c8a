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
// authenticates to the broker itself). It offers version 0 of each key in
// offered, whether or not the broker does (the APIs kproxy answers
// itself, client telemetry), unless the response carries an error code.
// It returns frame itself when there is nothing to change.
func ClampVersions(frame []byte, version int16, hideUnknown bool, hidden, offered []int16) []byte {
	resp, err := framing.DecodeResponse(frame, framing.KeyApiVersions, version)
	if err != nil || resp == nil {
		return frame
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.ErrorCode != 0 {
		offered = nil // an error answer is relayed with the broker's keys
	}
	changed := false
	keep := r.ApiKeys[:0]
	for _, k := range r.ApiKeys {
		max := framing.MaxVersion(k.ApiKey)
		switch {
		case slices.Contains(hidden, k.ApiKey):
			changed = true
			continue
		case slices.Contains(offered, k.ApiKey):
			continue // added below at the version kproxy answers
		case max < 0 && hideUnknown:
			changed = true
			continue
		case max >= 0 && k.MaxVersion > max:
			k.MaxVersion, changed = max, true
		}
		keep = append(keep, k)
	}
	if len(offered) > 0 {
		for _, k := range offered {
			keep = append(keep, kmsg.ApiVersionsResponseApiKey{ApiKey: k})
		}
		slices.SortFunc(keep, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
		changed = true
	}
	if !changed {
		return frame
	}
	r.ApiKeys = keep
	return EncodeResponse(r, framing.ResponseCorrelationID(frame))
}
