package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterErrorCoordinatorNotLearnt: a FindCoordinator error may name
// node 0 with no address (kfake does; Apache Kafka says -1). There is no
// address to learn: the node's port must stay pointed at its broker. It
// used to be re-targeted to ":0", and every new connection to it failed
// until the next discovery; a client retrying such an error kept breaking
// the node for everyone.
func TestClusterErrorCoordinatorNotLearnt(t *testing.T) {
	env := startCluster(t, 3, 7, nil)
	var before string
	waitFor(t, 20*time.Second, "node 0 learnt", func() bool {
		var ok bool
		before, ok = env.srv.Topology().Addr(0)
		return ok
	})
	c, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, v := range []int16{3, 4} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorKeys, req.CoordinatorType = v, "g", []string{"g"}, 9 // no such type
		if _, err := c.Write(encodeRequest(req, int32(v))); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		frame, err := readFrame(c)
		if err != nil {
			t.Fatalf("FindCoordinator v%d: %v", v, err)
		}
		resp := kmsg.NewPtrFindCoordinatorResponse()
		resp.Version = v
		if err := resp.ReadFrom(frame[9:]); err != nil { // size, correlation id, no header tags
			t.Fatal(err)
		}
		code, node := resp.ErrorCode, resp.NodeID
		if v >= 4 {
			code, node = resp.Coordinators[0].ErrorCode, resp.Coordinators[0].NodeID
		}
		if code != kerr.InvalidRequest.Code || node != 0 {
			t.Fatalf("FindCoordinator v%d: error %d on node %d, want INVALID_REQUEST on node 0 (the case under test)", v, code, node)
		}
		if after, _ := env.srv.Topology().Addr(0); after != before {
			t.Fatalf("after a FindCoordinator v%d error, node 0 is pointed at %q, want %q", v, after, before)
		}
	}
	nc := dialRaw(t, env.nodeAddr(0))
	defer nc.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := nc.Write(encodeRequest(req, 1)); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := readFrame(nc); err != nil {
		t.Fatalf("node 0's port after the errors: %v", err)
	}
}
