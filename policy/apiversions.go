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

// OfferVersions makes an ApiVersions response offer version 0 of each key
// in keys, whether or not the broker does: the APIs kproxy answers itself
// (client telemetry). A response with an error code is left as it is.
func OfferVersions(frame []byte, version int16, keys []int16) []byte {
	resp, err := framing.DecodeResponse(frame, framing.KeyApiVersions, version)
	if err != nil || resp == nil {
		return frame
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.ErrorCode != 0 {
		return frame
	}
	r.ApiKeys = slices.DeleteFunc(r.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return slices.Contains(keys, k.ApiKey) })
	for _, k := range keys {
		r.ApiKeys = append(r.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k})
	}
	slices.SortFunc(r.ApiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return EncodeResponse(r, framing.ResponseCorrelationID(frame))
}
