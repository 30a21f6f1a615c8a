package proxy

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/framing"
	"github.com/kproxy/kproxy/proxy/core"
	"github.com/kproxy/kproxy/proxy/loop"
)

// paddedApiVersions is an ApiVersions request padded to n bytes.
func paddedApiVersions(corr int32, n int) []byte {
	f := apiVersionsV0(corr)
	f = append(f, make([]byte, n-len(f))...)
	binary.BigEndian.PutUint32(f, uint32(n-framing.SizeLen))
	return f
}

// What a batch pins for its flush is what it took after a frame refused
// for its size: what it took before was flushed and released with the
// refusal, and counting it again would charge bytes no longer held and end
// the batch early (issue 14, item 5).
func TestBufferBudgetPinsOnlyWhatFollowsARefusal(t *testing.T) {
	const (
		before = 40 << 10 // relayed, then flushed by the refusal
		after  = 8 << 20  // more than the sockets to an upstream that stopped reading hold
	)
	stop := make(chan struct{})
	up := startFakeUpstream(t, func(net.Conn, []byte) { <-stop }) // reads one frame, then nothing
	t.Cleanup(func() { close(stop) })
	env := startProxy(t, up.addr())
	env.srv.SetPolicies(maxRequestRule(64 << 10))

	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 7, -1, 1000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "big"
	part := kmsg.NewProduceRequestTopicPartition()
	part.Records = make([]byte, 200<<10)
	topic.Partitions = append(topic.Partitions, part)
	produce.Topics = append(produce.Topics, topic)
	var in []byte
	in = append(in, paddedApiVersions(1, before)...)
	in = append(in, encodeRequest(produce, 2)...)
	in = append(in, paddedApiVersions(3, after)...)

	c := dialRaw(t, env.addr)
	waitFor(t, 5*time.Second, "the pair", func() bool {
		return len(env.pairs()) == 1
	})
	p := onlyPair(t, env)
	// Hold the relay back until all of it is buffered, so that the three
	// frames are one batch.
	release := p.HoldUpstreamWriter()
	go c.Write(in)
	waitFor(t, 10*time.Second, "the input buffered", func() bool { return p.Client().Reader().Len() == len(in) })
	release()

	waitFor(t, 10*time.Second, "the last frame flushing", func() bool {
		return p.Flushing(loop.ToUpstream) && p.Pinned(core.FromClient) != 0
	})
	got := p.Pinned(core.FromClient)
	p.Conn().Close("test over", nil) // the relay waits on the upstream; netpoll runs no close callback meanwhile
	if got != after {
		t.Fatalf("the batch pins %d bytes, want the %d taken after the refusal", got, after)
	}
}
