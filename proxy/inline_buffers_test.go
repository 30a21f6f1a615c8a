package proxy

import (
	"fmt"
	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/proxy/loop"
	"reflect"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// inputNodes walks a netpoll connection's input buffer (by reflection:
// netpoll exports nothing about it) and returns its nodes' capacities,
// from the oldest kept to the one being filled. It fails the test if
// netpoll's layout is not the one it knows (v0.7.2).
func inputNodes(t *testing.T, c any) []int {
	t.Helper()
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		t.Fatalf("netpoll connection is a %T, not a pointer to a struct: update inputNodes for this netpoll", c)
	}
	lb := v.Elem().FieldByName("inputBuffer")
	if !lb.IsValid() || lb.Kind() != reflect.Pointer {
		t.Fatalf("netpoll connection has no inputBuffer pointer: update inputNodes for this netpoll")
	}
	// Under the race detector netpoll's LinkBuffer is one that takes a
	// lock in every method: take it too, so the walk is ordered with the
	// poller's reads and the close.
	if l, ok := reflect.NewAt(lb.Type(), unsafe.Pointer(lb.UnsafeAddr())).Elem().Interface().(sync.Locker); ok {
		l.Lock()
		defer l.Unlock()
	}
	lb = lb.Elem()
	head, write := lb.FieldByName("head"), lb.FieldByName("write")
	if !head.IsValid() || !write.IsValid() {
		t.Fatalf("netpoll LinkBuffer has no head/write nodes: update inputNodes for this netpoll")
	}
	var caps []int
	for node := head; !node.IsNil() && len(caps) < 1<<16; node = node.Elem().FieldByName("next") {
		caps = append(caps, node.Elem().FieldByName("buf").Cap())
		if node.Pointer() == write.Pointer() {
			break
		}
	}
	return caps
}

// maxNodeBytes bounds one input node of a connection relayed on the
// poller under a steady pipelined load of small frames: it settles at
// 128-256 KiB, and this leaves room for a release from the pool that a
// busy poller made miss. netpoll sizes a
// node from the bytes read between two releases that reset the buffer's
// tail; batches on the poller cannot reset it, and without kproxy's
// periodic release from the pool (see inlineResetBytes) each node filled
// on the poller doubled the next, up to netpoll's 8 MiB.
const maxNodeBytes = 512 << 10

// A busy long-lived connection relayed on the poller keeps its read
// buffers near its working set: here about 14 KiB of responses and 1 KiB
// of requests in flight at a time, over 10 MB relayed. The bound is on
// what stays allocated, not on time.
func TestInlineInputBuffersStayBounded(t *testing.T) {
	env := startKfake(t, nil)
	c := dialRaw(t, env.addr)
	const rounds, depth = 800, 32
	var relayed int
	for i := 0; i < rounds; i++ {
		c.SetDeadline(time.Now().Add(20 * time.Second))
		var out []byte
		for j := 0; j < depth; j++ {
			out = append(out, apiVersionsV0(int32(i*depth+j))...)
		}
		if _, err := c.Write(out); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < depth; j++ {
			f, err := readFrame(c)
			if err != nil {
				t.Fatalf("round %d response %d: %v\nkproxy's log:\n%s", i, j, err, env.logs)
			}
			if got, want := corrOf(f), int32(i*depth+j); got != want {
				t.Fatalf("response has correlation id %d, want %d", got, want)
			}
			relayed += len(f)
		}
	}
	if batches(env, core.BatchResponses, core.OnPoller) == 0 || batches(env, core.BatchRequests, core.OnPoller) == 0 {
		t.Fatalf("no batch was relayed on the poller (requests %v, responses %v): the test checks nothing",
			batches(env, core.BatchRequests, core.OnPoller), batches(env, core.BatchResponses, core.OnPoller))
	}
	var p loop.Pair
	var found bool
	for _, q := range env.pairs() {
		p, found = q, true
	}
	if !found {
		t.Fatal("kproxy has no pair for the open connection")
	}
	// Every response has been read: the connection is idle, so its
	// buffers hold still while they are walked.
	for _, side := range []struct {
		name string
		conn any
	}{{"client", p.Client()}, {"upstream", p.Upstream()}} {
		caps := inputNodes(t, side.conn)
		total, largest := 0, 0
		for _, n := range caps {
			total += n
			largest = max(largest, n)
		}
		t.Logf("%s input: %d nodes, %d KiB (largest %d KiB), after %d KiB of responses", side.name, len(caps), total>>10, largest>>10, relayed>>10)
		if largest > maxNodeBytes {
			t.Errorf("%s input node of %d KiB (over %d KiB) after %d KiB relayed: %s", side.name, largest>>10, maxNodeBytes>>10, relayed>>10, fmt.Sprint(caps))
		}
	}
}
