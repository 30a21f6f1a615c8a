package relay

import (
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/telemetry"
)

// lagRequest feeds the lag table (telemetry.lag) from a request: a
// Fetch's offsets, or the group a group request names for its client id,
// read before any policy changes the frame. body is the request's,
// decoded once for everyone who needs it. For a Fetch it returns the
// walk's findings (walked true), which addFetch then needs not redo.
func (s *Session) lagRequest(frame []byte, h framing.RequestHeader, body *framing.Body) (fetch framing.FetchRequestInfo, walked bool) {
	if s.clientID != string(h.ClientID) {
		s.clientID = string(h.ClientID)
	}
	switch {
	case h.APIKey == framing.KeyFetch:
		return s.lag.Request(frame, h, s.clientID)
	case framing.GroupAPI(h.APIKey) && h.BodyOffset > 0:
		if req, err := body.Request(); err == nil && req != nil {
			s.env.Lag.LearnGroup(s.clientID, telemetry.GroupOf(req))
		}
	}
	return fetch, false
}
