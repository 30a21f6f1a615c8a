package policy

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// WithThrottle returns the response frame with throttle_time_ms raised to
// at least d, re-encoded; or frame itself when the response has no throttle
// field or already says as much. Only throttled responses pay for this.
func WithThrottle(frame []byte, key, version int16, d time.Duration) []byte {
	resp, err := framing.DecodeResponse(frame, key, version)
	if err != nil || resp == nil {
		return frame
	}
	t, ok := resp.(kmsg.ThrottleResponse)
	if !ok {
		return frame
	}
	ms := int32(min((d+time.Millisecond-1)/time.Millisecond, 1<<31-1)) // round up: never under-report
	if cur, _ := t.Throttle(); cur >= ms {
		return frame
	}
	resp.(kmsg.SetThrottleResponse).SetThrottle(ms)
	return EncodeResponse(resp, framing.ResponseCorrelationID(frame))
}
