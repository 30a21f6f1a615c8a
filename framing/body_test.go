package framing

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// In-package tests of Body and DecodeResponse, with frames encoded by kmsg.

func encodeRequest(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, corr)
}

// encodeResponse is resp as a broker frames it: size, correlation id, the
// tag buffer for header v1, body.
func encodeResponse(resp kmsg.Response, corr int32) []byte {
	out := binary.BigEndian.AppendUint32([]byte{0, 0, 0, 0}, uint32(corr))
	if ResponseHeaderVersion(resp.Key(), resp.GetVersion()) == 1 {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out
}

func bodyOf(t *testing.T, frame []byte) Body {
	t.Helper()
	h, err := ParseRequestHeader(frame)
	if err != nil {
		t.Fatal(err)
	}
	return NewBody(h, frame)
}

// The body is decoded on first use only, and the result is kept, so the
// tracer and policies share one decode.
func TestBodyDecodesOnce(t *testing.T) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group = 8, "grp"
	frame := encodeRequest(req, 5)
	b := bodyOf(t, frame)
	if b.Decoded() {
		t.Fatal("decoded before use")
	}
	if h := b.Header(); h.APIKey != 8 || h.APIVersion != 8 || h.CorrelationID != 5 {
		t.Fatalf("header %+v", h)
	}
	first, err := b.Request()
	if err != nil || first == nil {
		t.Fatalf("Request: %v, %v", first, err)
	}
	if !b.Decoded() {
		t.Error("Decoded still false")
	}
	if got := first.(*kmsg.OffsetCommitRequest); got.Group != "grp" || got.Version != 8 {
		t.Errorf("decoded %+v", got)
	}
	// A second decode would read the changed frame; the kept one does not.
	frame[len(frame)-1] ^= 0xff
	second, err := b.Request()
	if err != nil || second != first {
		t.Errorf("second call: %p, %v; want the first %p", second, err, first)
	}
}

// A version kmsg does not know is never decoded with a guessed layout.
func TestBodyUnknownVersion(t *testing.T) {
	frame := binary.BigEndian.AppendUint32(nil, 12)
	frame = binary.BigEndian.AppendUint16(frame, uint16(KeyProduce))
	frame = binary.BigEndian.AppendUint16(frame, 999)
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = append(frame, 1, 2, 3, 4)
	b := bodyOf(t, frame)
	req, err := b.Request()
	if req != nil || err != nil {
		t.Fatalf("Request: %v, %v; want nil, nil", req, err)
	}
	if !b.Decoded() {
		t.Error("Decoded false after Request ran")
	}
}

// A body that does not decode gives its error, every time, and no request.
func TestBodyMalformed(t *testing.T) {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "orders"
	tp.Partitions = append(tp.Partitions, kmsg.NewProduceRequestTopicPartition())
	req.Topics = append(req.Topics, tp)
	frame := encodeRequest(req, 1)
	b := bodyOf(t, frame[:len(frame)-4])
	for i := 0; i < 2; i++ {
		got, err := b.Request()
		if got != nil || err == nil {
			t.Errorf("call %d: %v, %v; want nil and an error", i, got, err)
		}
	}
}

// The decoded request aliases the frame, as Body's doc warns.
func TestBodyAliasesFrame(t *testing.T) {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group = 9, "grp"
	frame := encodeRequest(req, 1)
	b := bodyOf(t, frame)
	got, _ := b.Request()
	for i := b.Header().BodyOffset; i < len(frame); i++ {
		if frame[i] == 'g' {
			frame[i] = 'G'
		}
	}
	if g := got.(*kmsg.JoinGroupRequest).Group; g != "Grp" {
		t.Errorf("group %q after the frame changed; want it aliased", g)
	}
}

func TestDecodeResponse(t *testing.T) {
	md := kmsg.NewPtrMetadataResponse()
	md.Version = 12
	tp := kmsg.NewMetadataResponseTopic()
	tp.Topic, tp.ErrorCode = kmsg.StringPtr("orders"), 3
	md.Topics = append(md.Topics, tp)
	frame := encodeResponse(md, 9)
	resp, err := DecodeResponse(frame, KeyMetadata, 12)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.(*kmsg.MetadataResponse)
	if got.GetVersion() != 12 || len(got.Topics) != 1 || *got.Topics[0].Topic != "orders" || got.Topics[0].ErrorCode != 3 {
		t.Errorf("decoded %+v", got)
	}

	// ApiVersions v3 is flexible but its response header is v0.
	av := kmsg.NewPtrApiVersionsResponse()
	av.Version, av.ErrorCode = 3, 35
	resp, err = DecodeResponse(encodeResponse(av, 1), KeyApiVersions, 3)
	if err != nil || resp.(*kmsg.ApiVersionsResponse).ErrorCode != 35 {
		t.Errorf("ApiVersions v3: %v, %v", resp, err)
	}

	if resp, err := DecodeResponse(frame, KeyMetadata, 999); resp != nil || err != nil {
		t.Errorf("unknown version: %v, %v; want nil, nil", resp, err)
	}
	if resp, err := DecodeResponse(frame[:6], KeyMetadata, 12); resp != nil || err == nil {
		t.Errorf("short frame: %v, %v", resp, err)
	}
	if resp, err := DecodeResponse(frame[:len(frame)-3], KeyMetadata, 12); resp != nil || err == nil {
		t.Errorf("truncated body: %v, %v", resp, err)
	}
}
