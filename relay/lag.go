package relay

import (
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/telemetry"
)

// lagRequest feeds the lag table (telemetry.lag) from a request: a
// Fetch's offsets, or the group a group request names for its client id.
// Both are read before any policy changes the frame.
// body is the request's, decoded once for everyone who needs it.
func (s *Session) lagRequest(frame []byte, h framing.RequestHeader, body *framing.Body) {
	if s.clientID != string(h.ClientID) {
		s.clientID = string(h.ClientID)
	}
	switch {
	case h.APIKey == framing.KeyFetch:
		s.lag.Request(frame, h, s.clientID)
	case telemetry.NamesGroup(h.APIKey) && h.BodyOffset > 0:
		if req, err := body.Request(); err == nil && req != nil {
			s.env.Lag.LearnGroup(s.clientID, telemetry.GroupOf(req))
		}
	}
}
