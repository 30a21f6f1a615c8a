package cluster

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Discover asks the broker at the other end of conn for the cluster's
// brokers: ApiVersions, then Metadata for no topic at the highest version
// both sides know. kproxy does it at start and when a client reaches a node
// port it has not learnt, so node ports are served before any client asked
// for metadata (a client's cached metadata survives a kproxy restart).
// maxBytes bounds each response, checked before it is read.
func Discover(conn io.ReadWriter, maxBytes int) ([]Broker, error) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kproxy"))
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0 // every broker answers v0; the answer lists the rest
	avResp := kmsg.NewPtrApiVersionsResponse()
	if err := roundTrip(conn, f, av, avResp, 1, maxBytes); err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(avResp.ErrorCode); err != nil {
		return nil, fmt.Errorf("cluster: ApiVersions: %w", err)
	}
	md := kmsg.NewPtrMetadataRequest()
	version := int16(-1)
	for _, k := range avResp.ApiKeys {
		if k.ApiKey == md.Key() {
			version = min(k.MaxVersion, md.MaxVersion())
			if version < k.MinVersion {
				version = -1
			}
		}
	}
	if version < 0 {
		return nil, fmt.Errorf("cluster: the bootstrap offers no Metadata version kproxy knows")
	}
	md.Version = version
	md.Topics = []kmsg.MetadataRequestTopic{} // none: brokers only
	mdResp := kmsg.NewPtrMetadataResponse()
	if err := roundTrip(conn, f, md, mdResp, 2, maxBytes); err != nil {
		return nil, err
	}
	brokers := make([]Broker, 0, len(mdResp.Brokers))
	for _, b := range mdResp.Brokers {
		brokers = append(brokers, Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, EndpointType: EndpointBroker})
	}
	if len(brokers) == 0 {
		return nil, fmt.Errorf("cluster: the bootstrap's Metadata v%d names no broker", version)
	}
	return brokers, nil
}

// roundTrip writes req with correlation id id and reads its response into
// resp.
func roundTrip(conn io.ReadWriter, f *kmsg.RequestFormatter, req kmsg.Request, resp kmsg.Response, id int32, maxBytes int) error {
	name := kmsg.NameForKey(req.Key())
	if _, err := conn.Write(f.AppendRequest(nil, req, id)); err != nil {
		return fmt.Errorf("cluster: sending %s: %w", name, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return fmt.Errorf("cluster: reading the %s response: %w", name, err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || uint64(n) > uint64(maxBytes) {
		return fmt.Errorf("cluster: %s response of %d bytes (limit %d): is this a Kafka broker, and TLS set as it expects?", name, n, maxBytes)
	}
	frame := make([]byte, 4+int(n))
	copy(frame, size[:])
	if _, err := io.ReadFull(conn, frame[4:]); err != nil {
		return fmt.Errorf("cluster: reading the %s response: %w", name, err)
	}
	if got := int32(binary.BigEndian.Uint32(frame[4:])); got != id {
		return fmt.Errorf("cluster: %s response has correlation id %d, want %d", name, got, id)
	}
	resp.SetVersion(req.GetVersion())
	off, err := bodyOffset(frame, req.Key(), resp.IsFlexible())
	if err != nil {
		return err
	}
	if err := resp.ReadFrom(frame[off:]); err != nil {
		return fmt.Errorf("cluster: decoding the %s response: %w", name, err)
	}
	return nil
}
