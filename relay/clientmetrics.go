package relay

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/correlate"
	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/telemetry"
)

// clientTelemetryAPI reports whether key is one of KIP-714's two APIs,
// which kproxy answers itself when telemetry.clients is on.
func clientTelemetryAPI(key int16) bool {
	return key == framing.KeyGetTelemetrySubscriptions || key == framing.KeyPushTelemetry
}

// clientTelemetryKeys are offered in ApiVersions when kproxy answers
// them, whether or not the broker does.
var clientTelemetryKeys = []int16{framing.KeyGetTelemetrySubscriptions, framing.KeyPushTelemetry}

// offered are the API keys ApiVersions answers offer whether or not the
// broker does: the client telemetry APIs when kproxy answers them.
func (e *Env) offered() []int16 {
	if e.Clients == nil {
		return nil
	}
	return clientTelemetryKeys
}

// answerTelemetry answers a GetTelemetrySubscriptions or PushTelemetry
// request in the broker's place. A body that cannot be read closes the
// connection, as a broker does with a malformed request.
func (s *Session) answerTelemetry(body *framing.Body, clientID string, e correlate.Entry, up *Batch, mayWait bool) error {
	req, err := body.Request()
	if err != nil || req == nil {
		s.env.Tracer.Fail(spanOf(e), "kproxy.malformed_request")
		if err == nil {
			err = framing.ErrMalformed
		}
		return err
	}
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.GetTelemetrySubscriptionsRequest:
		resp = s.env.Clients.Subscriptions(r)
	case *kmsg.PushTelemetryRequest:
		resp = s.env.Clients.Push(r, telemetry.ClientMeta{ClientID: clientID, Principal: s.conn.Identity.Name(), Address: s.client})
	}
	return s.queueAnswer(resp, e, up, mayWait)
}
