//go:build linux && nodetest

package node_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawKafka is one Kafka connection the test drives request by request, so
// that a check can say "this same connection" (a kgo client may redial).
// Only versions with a v0 response header are used.
type rawKafka struct {
	c    net.Conn
	corr int32
}

var rawFormatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("node-test"))

// roundTrip sends req and decodes its response.
func (r *rawKafka) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	r.corr++
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Write(rawFormatter.AppendRequest(nil, req, r.corr)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, body); err != nil {
		return nil, err
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != r.corr {
		return nil, fmt.Errorf("response with the wrong correlation id")
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	return resp, resp.ReadFrom(body[4:])
}

// apiVersions asks ApiVersions v2 and returns its error code.
func (r *rawKafka) apiVersions() (int16, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 2
	resp, err := r.roundTrip(req)
	if err != nil {
		return 0, err
	}
	return resp.(*kmsg.ApiVersionsResponse).ErrorCode, nil
}

// createTopic asks CreateTopics v4 for one topic and returns its error code.
func (r *rawKafka) createTopic(name string) (int16, error) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version, req.TimeoutMillis = 4, 10000
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = name, 1, 1
	req.Topics = append(req.Topics, topic)
	resp, err := r.roundTrip(req)
	if err != nil {
		return 0, err
	}
	ts := resp.(*kmsg.CreateTopicsResponse).Topics
	if len(ts) != 1 {
		return 0, fmt.Errorf("%d topics in the CreateTopics answer", len(ts))
	}
	return ts[0].ErrorCode, nil
}
