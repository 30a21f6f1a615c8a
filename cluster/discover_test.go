package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
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

// A client waiting for a node kproxy does not know is refused as soon as
// a discovery begun after it came has worked without naming the node,
// not at the end of dial_timeout; a discovery already under way when it
// came does not count, nor does one that failed. At most maxWaiting wait
// (issue 27, item 8).
func TestTopologyWaitEndsWithADiscovery(t *testing.T) {
	topo := NewTopology(Config{NodePortBase: 9100, NodeIDs: NodeIDRange{Min: 0, Max: 9}}, zerolog.Nop())
	topo.Discovering() // under way before the client comes
	done := make(chan error, 1)
	go func() {
		_, err := topo.Wait(context.Background(), 5, func() {})
		done <- err
	}()
	waitUntil(t, func() bool { topo.mu.Lock(); defer topo.mu.Unlock(); return topo.waiting == 1 })
	topo.Learn([]Broker{{NodeID: 1, Host: "b1", Port: 9092, EndpointType: EndpointBroker}})
	topo.Discovered(nil) // the one begun before: the client waits on
	topo.Discovering()
	topo.Discovered(errors.New("bootstrap down")) // failed: waits on
	select {
	case err := <-done:
		t.Fatalf("Wait ended after discoveries that do not settle it: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	topo.Discovering()
	topo.Discovered(nil) // begun after, worked, no node 5
	select {
	case err := <-done:
		if !errors.Is(err, ErrNoSuchNode) {
			t.Fatalf("Wait = %v, want ErrNoSuchNode", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait went on after a discovery without its node")
	}
	// The cap.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range maxWaiting {
		go topo.Wait(ctx, 7, nil)
	}
	waitUntil(t, func() bool { topo.mu.Lock(); defer topo.mu.Unlock(); return topo.waiting == maxWaiting })
	if _, err := topo.Wait(ctx, 7, nil); err == nil || errors.Is(err, ErrNoSuchNode) {
		t.Fatalf("a client past maxWaiting: %v, want refused at once", err)
	}
}

// waitUntil polls cond for up to 10s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
