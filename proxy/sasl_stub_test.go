package proxy

import (
	"encoding/binary"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/sasl"
)

// saslStub is a broker that takes any PLAIN credentials (SaslHandshake v1,
// one SaslAuthenticate round) and, once a connection has authenticated,
// hands its requests to after; before that it answers ApiVersions v0 with
// versions that keep every answer non-flexible. silent: a connection that
// gets no answer at all.
type saslStub struct {
	*fakeUpstream
	mu     sync.Mutex
	authed map[net.Conn]bool
}

func startSaslStub(t testing.TB, silent bool, after func(c net.Conn, frame []byte)) *saslStub {
	t.Helper()
	s := &saslStub{authed: map[net.Conn]bool{}}
	s.fakeUpstream = startFakeUpstream(t, func(c net.Conn, frame []byte) {
		if silent {
			return
		}
		s.mu.Lock()
		authed := s.authed[c]
		s.mu.Unlock()
		if authed {
			after(c, frame)
			return
		}
		key, version := int16(binary.BigEndian.Uint16(frame[4:])), int16(binary.BigEndian.Uint16(frame[6:]))
		var resp kmsg.Response
		switch key {
		case framing.KeyApiVersions:
			r := kmsg.NewPtrApiVersionsResponse()
			r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 8}, {ApiKey: 17, MaxVersion: 1},
				{ApiKey: 18, MaxVersion: 3}, {ApiKey: 36, MaxVersion: 1}}
			resp = r
		case framing.KeySaslHandshake:
			resp = kmsg.NewPtrSASLHandshakeResponse()
		case framing.KeySaslAuthenticate:
			resp = kmsg.NewPtrSASLAuthenticateResponse()
			s.mu.Lock()
			s.authed[c] = true
			s.mu.Unlock()
		default:
			c.Close()
			return
		}
		resp.SetVersion(version)
		echoResponse(c, frame, resp.AppendTo(nil))
	})
	return s
}

// plainOriginator originates PLAIN as alice with password pass, from files.
func plainOriginator(t testing.TB, pass string) *sasl.Originator {
	t.Helper()
	dir := t.TempDir()
	writeSecret(t, dir, "username", "alice")
	writeSecret(t, dir, "password", pass)
	o, err := sasl.New(sasl.Config{Upstream: &sasl.Upstream{Mechanism: sasl.Plain,
		UsernameFile: filepath.Join(dir, "username"), PasswordFile: filepath.Join(dir, "password")}}, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return o
}
