package correlate

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Frames are encoded by hand (header) and with kmsg (body) from the wire
// facts, so the table is tested against real encodings.

// withSize prepends the int32 big-endian size prefix.
func withSize(payload []byte) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(payload)), uint32(len(payload)))
	return append(out, payload...)
}

// respFrame is a response frame with header v0: size, correlation id, body.
func respFrame(corr int32, body ...byte) []byte {
	return withSize(append(binary.BigEndian.AppendUint32(nil, uint32(corr)), body...))
}

// reqFrame is a request frame with header v1 (hv 1) or v2 (hv 2, no tags).
func reqFrame(key, version int16, corr int32, clientID string, hv int, body []byte) []byte {
	p := binary.BigEndian.AppendUint16(nil, uint16(key))
	p = binary.BigEndian.AppendUint16(p, uint16(version))
	p = binary.BigEndian.AppendUint32(p, uint32(corr))
	p = binary.BigEndian.AppendUint16(p, uint16(len(clientID)))
	p = append(p, clientID...)
	if hv == 2 {
		p = append(p, 0)
	}
	return withSize(append(p, body...))
}

// metadataRequest is a real Metadata v1 request frame, what a client sends
// once authentication is done.
func metadataRequest(corr int32) []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	return reqFrame(3, 1, corr, "client", 1, req.AppendTo(nil))
}

// handshakeV0 is a SaslHandshake v0 request body for mechanism.
func handshakeV0(mechanism string) []byte {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 0, mechanism
	return req.AppendTo(nil)
}

// handshakeV0Response is a SaslHandshake v0 response frame.
func handshakeV0Response(corr int32, errCode int16, mechanisms ...string) []byte {
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.Version, resp.ErrorCode, resp.SupportedMechanisms = 0, errCode, mechanisms
	return respFrame(corr, resp.AppendTo(nil)...)
}

// token is a raw SASL token frame: size, then the token, no header.
func token(b ...byte) []byte { return withSize(b) }
