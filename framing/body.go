package framing

import "github.com/twmb/franz-go/pkg/kmsg"

// Body decodes a request body with kmsg on first use and keeps the result,
// so the tracer and the policies share one decode and a frame nobody asks
// about is never decoded. The decoded request aliases the frame (kmsg's
// UnsafeReadFrom) and is valid only as long as the frame is.
type Body struct {
	h     RequestHeader
	frame []byte
	req   kmsg.Request
	err   error
	done  bool
}

// NewBody wraps a parsed request frame.
func NewBody(h RequestHeader, frame []byte) Body { return Body{h: h, frame: frame} }

// HeaderOnly stands for a request whose body kproxy never held (one
// refused by size, dropped as it arrived): Request finds nothing to
// decode, so a span or rule sees the header's facts only. h may alias the
// reader's buffer: use it before that is released.
func HeaderOnly(h RequestHeader) Body { return Body{h: h, done: true} }

// Request returns the decoded body, or nil when kproxy does not know the
// key/version (the frame is then relayed opaquely) or the body is invalid.
func (b *Body) Request() (kmsg.Request, error) {
	if b.done {
		return b.req, b.err
	}
	b.done = true
	if b.h.HeaderVersion < 0 || b.h.BodyOffset == 0 {
		return nil, nil
	}
	req := kmsg.RequestForKey(b.h.APIKey)
	req.SetVersion(b.h.APIVersion)
	if u, ok := req.(kmsg.UnsafeReadFrom); ok {
		b.err = u.UnsafeReadFrom(b.frame[b.h.BodyOffset:])
	} else {
		b.err = req.ReadFrom(b.frame[b.h.BodyOffset:])
	}
	if b.err == nil {
		b.req = req
	}
	return b.req, b.err
}

// Decoded reports whether Request has run.
func (b *Body) Decoded() bool { return b.done }

// Header is the request header the body belongs to.
func (b *Body) Header() RequestHeader { return b.h }

// DecodeResponse decodes a response frame to a request of key/version, or
// returns nil when the version is unknown.
func DecodeResponse(frame []byte, key, version int16) (kmsg.Response, error) {
	h, err := ParseResponseHeader(frame, key, version)
	if err != nil || h.BodyOffset == 0 {
		return nil, err
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if u, ok := resp.(kmsg.UnsafeReadFrom); ok {
		err = u.UnsafeReadFrom(frame[h.BodyOffset:])
	} else {
		err = resp.ReadFrom(frame[h.BodyOffset:])
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}
