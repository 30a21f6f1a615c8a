package sasl

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestStreamCancelUnblocks: a cancelled exchange stops waiting for an
// answer that never comes, and leaves the connection with no deadline, as
// the relay that takes it over needs.
func TestStreamCancelUnblocks(t *testing.T) {
	c, broker := net.Pipe()
	defer c.Close()
	defer broker.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		var head [4]byte
		if _, err := io.ReadFull(broker, head[:]); err == nil { // the request arrived: leave
			cancel()
		}
	}()
	done := make(chan error, 1)
	go func() {
		_, err := StreamRoundTrip(c, 1<<20)(ctx, kmsg.NewPtrApiVersionsRequest())
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the exchange still waits 30s after its cancellation")
	}
	go func() {
		io.Copy(io.Discard, broker) // the rest of the request
	}()
	go broker.Write([]byte{1, 2, 3, 4})
	var got [4]byte
	if _, err := io.ReadFull(c, got[:]); err != nil {
		t.Fatalf("reading after the cancelled exchange: %v (a deadline left behind?)", err)
	}
}
