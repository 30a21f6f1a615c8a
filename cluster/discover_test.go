package cluster

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDiscoverClosedOnMetadata: a bootstrap that answers ApiVersions and
// closes the connection on Metadata (a SASL listener before
// authentication) is ErrNeedsAuth; one that closes before answering
// anything is a plain failure.
func TestDiscoverClosedOnMetadata(t *testing.T) {
	for _, tc := range []struct {
		name      string
		answers   int
		needsAuth bool
	}{{"closed on ApiVersions", 0, false}, {"closed on Metadata", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			kp, broker := net.Pipe()
			defer kp.Close()
			go func() {
				defer broker.Close()
				for i := 0; ; i++ {
					var size [4]byte
					if _, err := io.ReadFull(broker, size[:]); err != nil {
						return
					}
					req := make([]byte, binary.BigEndian.Uint32(size[:]))
					if _, err := io.ReadFull(broker, req); err != nil || i >= tc.answers {
						return
					}
					r := kmsg.NewPtrApiVersionsResponse()
					r.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 8}}
					body := r.AppendTo(nil)
					out := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
					out = append(append(out, req[4:8]...), body...)
					if _, err := broker.Write(out); err != nil {
						return
					}
				}
			}()
			_, err := Discover(kp, 1<<20)
			if err == nil || errors.Is(err, ErrNeedsAuth) != tc.needsAuth {
				t.Fatalf("Discover: %v; want ErrNeedsAuth: %v", err, tc.needsAuth)
			}
		})
	}
}
