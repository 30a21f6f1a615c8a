package proxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// viaDialer dials TCP for a client and remembers every address it was asked
// for, so a test can prove the client only ever connected to kproxy. It
// serves sarama (Net.Proxy.Dialer) and kafka-go (Dialer.DialFunc,
// Transport.Dial).
type viaDialer struct {
	want  string
	mu    sync.Mutex
	dials int
	bad   []string
}

// DialContext records addr and dials it.
func (d *viaDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dials++
	if addr != d.want {
		d.bad = append(d.bad, addr)
	}
	d.mu.Unlock()
	nd := net.Dialer{Timeout: 5 * time.Second}
	return nd.DialContext(ctx, network, addr)
}

// Dial is DialContext without a context, as sarama's proxy dialer wants.
func (d *viaDialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

// check fails t if the client dialled nothing or anything but kproxy.
func (d *viaDialer) check(t testing.TB) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dials == 0 {
		t.Fatal("client never dialled through the recording dialer")
	}
	if len(d.bad) > 0 {
		t.Fatalf("client bypassed kproxy %s: dialled %v", d.want, d.bad)
	}
}

// saramaConfig is a sarama config for a version kfake supports, dialling
// through d and consuming from the oldest offset.
func saramaConfig(d *viaDialer) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.ClientID = "kproxy-sarama-test"
	cfg.Net.Proxy.Enable = true
	cfg.Net.Proxy.Dialer = d
	cfg.Net.ReadTimeout = 20 * time.Second
	cfg.Net.WriteTimeout = 20 * time.Second
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	return cfg
}

// saramaNewClient opens a sarama client on kproxy and closes it at the end
// of the test.
func saramaNewClient(t testing.TB, env *testEnv, cfg *sarama.Config) sarama.Client {
	t.Helper()
	cl, err := sarama.NewClient([]string{env.addr}, cfg)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// saramaCheckBrokers fails t unless every broker sarama learned from
// Metadata is kproxy.
func saramaCheckBrokers(t testing.TB, env *testEnv, cl sarama.Client) {
	t.Helper()
	bs := cl.Brokers()
	if len(bs) == 0 {
		t.Fatal("sarama knows no brokers")
	}
	for _, b := range bs {
		if b.Addr() != env.addr {
			t.Fatalf("sarama knows broker %d at %s, not kproxy %s", b.ID(), b.Addr(), env.addr)
		}
	}
}

// saramaLedger is a consumer group handler adding every claimed record to a
// ledger; it calls done once want distinct keys were seen.
type saramaLedger struct {
	mu   sync.Mutex
	l    *ledger
	want int
	done context.CancelFunc
}

func (h *saramaLedger) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaLedger) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaLedger) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.mu.Lock()
			h.l.add(m.Key, m.Value)
			n := len(h.l.seen)
			h.mu.Unlock()
			sess.MarkMessage(m, "")
			if n >= h.want {
				h.done()
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

// seen is how many distinct keys the handler has consumed.
func (h *saramaLedger) seen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.l.seen)
}

// saramaConsumeAll consumes topic with a consumer group on cl until want
// distinct keys arrived, closes the group (committing marked offsets) and
// returns the ledger.
func saramaConsumeAll(ctx context.Context, t testing.TB, cl sarama.Client, group, topic string, want int) *ledger {
	t.Helper()
	cg, err := sarama.NewConsumerGroupFromClient(group, cl)
	if err != nil {
		t.Fatalf("consumer group: %v", err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	h := &saramaLedger{l: newLedger(), want: want, done: stop}
	var (
		emu  sync.Mutex
		errs error
	)
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for err := range cg.Errors() {
			emu.Lock()
			errs = errors.Join(errs, err)
			emu.Unlock()
		}
	}()
	for cctx.Err() == nil {
		if err := cg.Consume(cctx, []string{topic}, h); err != nil {
			cg.Close()
			t.Fatalf("consume after %d records: %v", h.seen(), err)
		}
	}
	if err := cg.Close(); err != nil {
		t.Fatalf("close consumer group: %v", err)
	}
	<-errsDone
	if ctx.Err() != nil {
		t.Fatalf("timed out after %d of %d records (group errors: %v)", h.seen(), want, errs)
	}
	if errs != nil {
		t.Fatalf("consumer group errors: %v", errs)
	}
	return h.l
}

// TestSaramaProduceConsumeGroup round-trips recordCount keyed records with
// an idempotent acks=all async producer and a consumer group.
func TestSaramaProduceConsumeGroup(t *testing.T) {
	const topic = "sarama"
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(4, topic)})
	pdials := &viaDialer{want: env.addr} // the producer's client
	cdials := &viaDialer{want: env.addr} // the consumer's client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	pcfg := saramaConfig(pdials)
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Idempotent = true
	pcfg.Net.MaxOpenRequests = 1
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.Return.Errors = true
	pcfg.Producer.Flush.Bytes = 512 << 10
	pcfg.Producer.Flush.Frequency = 5 * time.Millisecond
	pcl := saramaNewClient(t, env, pcfg)
	prod, err := sarama.NewAsyncProducerFromClient(pcl)
	if err != nil {
		t.Fatal(err)
	}
	fed := make(chan struct{}) // closed once the feeder stopped sending
	go func() {
		defer close(fed)
		for i := 0; i < recordCount; i++ {
			m := &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(keyOf(i)),
				Value: sarama.ByteEncoder(valueOf(i))}
			select {
			case prod.Input() <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	closed := false
	defer func() { // on a failure: stop the feeder before closing Input
		if !closed {
			cancel()
			<-fed
			prod.AsyncClose()
		}
	}()
	var perr error
	acked, failed := 0, 0
	for acked+failed < recordCount {
		select {
		case <-prod.Successes():
			acked++
		case pe := <-prod.Errors():
			failed++
			if failed <= 5 {
				perr = errors.Join(perr, pe)
			}
		case <-ctx.Done():
			t.Fatalf("produce timed out after %d acked, %d failed: %v", acked, failed, perr)
		}
	}
	if failed > 0 {
		t.Fatalf("produce: %d of %d records failed, first: %v", failed, recordCount, perr)
	}
	<-fed
	closed = true
	if err := prod.Close(); err != nil {
		t.Fatalf("close producer: %v", err)
	}
	saramaCheckBrokers(t, env, pcl)

	ccl := saramaNewClient(t, env, saramaConfig(cdials))
	l := saramaConsumeAll(ctx, t, ccl, "sarama-group", topic, recordCount)
	l.verify(t, recordCount)

	saramaCheckBrokers(t, env, ccl)
	pdials.check(t)
	cdials.check(t)
	for _, api := range []string{"Produce", "Fetch", "JoinGroup", "SyncGroup", "OffsetCommit"} {
		if env.requests(api) == 0 {
			t.Errorf("kproxy saw no %s request", api)
		}
	}
}

// TestSaramaAcksZero sends acks=0 produces, each answered by nothing,
// interleaved with requests that are answered on the same connection; then
// consumes the records back through the same client. A proxy that expected
// a response to acks=0 would route later responses to the wrong requests.
func TestSaramaAcksZero(t *testing.T) {
	const (
		topic = "sarama-acks0"
		n     = 1000
	)
	env := startKfake(t, []kfake.Opt{kfake.SeedTopics(2, topic)})
	dials := &viaDialer{want: env.addr}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cfg := saramaConfig(dials)
	cfg.Producer.RequiredAcks = sarama.NoResponse
	cfg.Producer.Return.Successes = true
	cl := saramaNewClient(t, env, cfg)
	prod, err := sarama.NewSyncProducerFromClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	leader, err := cl.Leader(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic,
			Key: sarama.ByteEncoder(keyOf(i)), Value: sarama.ByteEncoder(valueOf(i))})
		if err != nil {
			t.Fatalf("acks=0 send %d: %v", i, err)
		}
		if i%50 == 49 {
			// A request answered on the connection that carries the
			// unanswered produces: its response must be its own.
			md, err := leader.GetMetadata(&sarama.MetadataRequest{Version: 7, Topics: []string{topic}})
			if err != nil {
				t.Fatalf("metadata after %d acks=0 produces: %v", i+1, err)
			}
			if len(md.Topics) != 1 || md.Topics[0].Name != topic || len(md.Topics[0].Partitions) != 2 {
				t.Fatalf("metadata after %d acks=0 produces answered something else: %+v", i+1, md.Topics)
			}
		}
	}
	if err := cl.RefreshMetadata(topic); err != nil {
		t.Fatalf("refresh metadata: %v", err)
	}
	if _, err := cl.Controller(); err != nil {
		t.Fatalf("controller: %v", err)
	}
	// ListOffsets follows the produces on the leader's connection.
	var total int64
	waitFor(t, 10*time.Second, "acks=0 records to reach the log", func() bool {
		total = 0
		for _, p := range []int32{0, 1} {
			off, err := cl.GetOffset(topic, p, sarama.OffsetNewest)
			if err != nil {
				t.Fatalf("list offsets: %v", err)
			}
			total += off
		}
		return total >= n
	})
	if total != n {
		t.Fatalf("log end offsets sum to %d, want %d", total, n)
	}

	l := saramaConsumeAll(ctx, t, cl, "sarama-acks0-group", topic, n)
	l.verify(t, n)

	saramaCheckBrokers(t, env, cl)
	dials.check(t)
	if got := env.requests("Produce"); got < n {
		t.Errorf("kproxy saw %v Produce requests, want >= %d", got, n)
	}
	for _, api := range []string{"Metadata", "ListOffsets", "Fetch", "JoinGroup"} {
		if env.requests(api) == 0 {
			t.Errorf("kproxy saw no %s request", api)
		}
	}
}
