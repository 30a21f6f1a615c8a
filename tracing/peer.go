// This file holds the Peer: what every span of one client/upstream pair
// shares (addresses, principals, the topic ids learnt), built once when
// the pair opens so that no span rebuilds it.

package tracing

import (
	"net"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/kproxy/kproxy/framing"
)

// Peer holds what every span of one client/upstream pair shares, built once
// when the pair opens.
type Peer struct {
	attrs    []attribute.KeyValue
	ids      *framing.TopicIDs
	clientID string // the last client id seen; a client keeps one
	// encoded is attrs as OTLP span attributes, written by the lean
	// exporter at the pair's first span and reused for the rest.
	encoded atomic.Pointer[[]byte]
}

// clientIDString returns id as a string, reusing the last one when equal.
// Only the pair's request goroutine calls it.
func (p *Peer) clientIDString(id []byte) string {
	if string(id) != p.clientID {
		p.clientID = string(id)
	}
	return p.clientID
}

// NewPeer describes a pair: client is the client's address, upstream the
// broker's HOST:PORT, ids the topic names learnt from Metadata.
func NewPeer(client, upstream string, ids *framing.TopicIDs) *Peer {
	p := &Peer{attrs: []attribute.KeyValue{semconv.MessagingSystemKafka}, ids: ids}
	if h, port, err := net.SplitHostPort(upstream); err == nil {
		n, _ := strconv.Atoi(port)
		p.attrs = append(p.attrs, semconv.ServerAddress(h), semconv.ServerPort(n))
	}
	if h, port, err := net.SplitHostPort(client); err == nil {
		n, _ := strconv.Atoi(port)
		p.attrs = append(p.attrs, semconv.NetworkPeerAddress(h), semconv.NetworkPeerPort(n))
	}
	return p
}

// PrincipalKey is the span attribute naming the client's proven identity
// (the first of tlsconf.Identities: a SPIFFE ID or a certificate CN).
const PrincipalKey = attribute.Key("kproxy.principal")

// SetPrincipal adds the client's proven identity to every span of the
// pair; nil-safe. Call it before the pair's first request.
func (p *Peer) SetPrincipal(name string) {
	if p != nil && name != "" {
		p.attrs = append(p.attrs, PrincipalKey.String(name))
	}
}

// UpstreamPrincipalKey is the span attribute naming the principal kproxy
// authenticated as to the broker (sasl.upstream): the username, or the
// token's subject.
const UpstreamPrincipalKey = attribute.Key("kproxy.upstream.principal")

// SetUpstreamPrincipal adds the principal kproxy authenticated as to the
// broker to every span of the pair; nil-safe. Call it before the pair's
// first request.
func (p *Peer) SetUpstreamPrincipal(name string) {
	if p != nil && name != "" {
		p.attrs = append(p.attrs, UpstreamPrincipalKey.String(name))
	}
}
