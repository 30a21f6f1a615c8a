package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
)

// maxFrame bounds any frame kbench reads, as a broker's
// socket.request.max.bytes does, so a garbage size cannot make it allocate
// gigabytes.
const maxFrame = 100 << 20

// readFrame reads one whole size-prefixed frame into *buf (grown as needed)
// and returns it, size prefix included, which is the layout framing's
// header parsers expect. The frame is valid until the next call.
func readFrame(r *bufio.Reader, buf *[]byte) ([]byte, error) {
	p, err := r.Peek(framing.SizeLen)
	if err != nil {
		return nil, err
	}
	size := int(int32(binary.BigEndian.Uint32(p)))
	if size < 0 || size > maxFrame {
		return nil, fmt.Errorf("frame size %d out of range", size)
	}
	n := framing.SizeLen + size
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	frame := (*buf)[:n]
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, err
	}
	return frame, nil
}

// appendResponse appends resp as a whole response frame answering a request
// with correlation id corr of key/version: size, correlation id, the
// tagged-field byte when the response header is flexible, and the body.
func appendResponse(dst []byte, key, version int16, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if framing.ResponseHeaderVersion(key, version) == 1 {
		dst = append(dst, 0) // no header tags
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-framing.SizeLen))
	return dst
}
