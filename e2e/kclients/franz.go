package kclients

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Franz drives github.com/twmb/franz-go.
type Franz struct{ Version string }

func (d Franz) Name() string             { return "franz-go " + d.Version }
func (Franz) Unsupported(Feature) string { return "" }

func (Franz) opts(c Conn) ([]kgo.Opt, error) {
	o := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap), kgo.RetryTimeout(30 * time.Second)}
	tc, err := c.TLS.Config()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		o = append(o, kgo.DialTLSConfig(tc))
	}
	switch c.SASL.Mechanism {
	case "":
	case "PLAIN":
		o = append(o, kgo.SASL(plain.Auth{User: c.SASL.User, Pass: c.SASL.Password}.AsMechanism()))
	case "SCRAM-SHA-512":
		o = append(o, kgo.SASL(scram.Auth{User: c.SASL.User, Pass: c.SASL.Password}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("franz-go: SASL mechanism %q", c.SASL.Mechanism)
	}
	return o, nil
}

// franzFaults are franz-go's settings for a network that fails for
// seconds at a time. By default franz-go does not retry a request whose
// connection ends before the first response (an EOF on ApiVersions or on
// the first request), taking it for a TLS or SASL misconfiguration, and
// fails the records: a reset or a cut right after a reconnect then fails
// an idempotent producer outright (TestToxicsEveryClient saw "broker
// closed the connection immediately during api versions negotiation",
// then OUT_OF_ORDER_SEQUENCE_NUMBER for the next batch). AlwaysRetryEOF
// is its documented switch for a configuration known to be right.
var franzFaults = []kgo.Opt{kgo.AlwaysRetryEOF()}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown compression %q", name)
}

func (d Franz) Produce(ctx context.Context, o ProduceOpts, recs []Record) error {
	opts, err := d.opts(o.Conn)
	if err != nil {
		return err
	}
	c, err := codec(o.Compression)
	if err != nil {
		return err
	}
	opts = append(opts, kgo.DefaultProduceTopic(o.Topic), kgo.ProducerBatchCompression(c))
	if o.Faults {
		opts = append(opts, franzFaults...)
	}
	switch {
	case (o.Idempotent || o.TransactionalID != "") && o.Acks != "all":
		return fmt.Errorf("franz-go: an idempotent or transactional producer needs acks=all, not %s", o.Acks)
	case o.Acks == "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case o.Acks == "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case !o.Idempotent && o.TransactionalID == "":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	if o.TransactionalID != "" {
		opts = append(opts, kgo.TransactionalID(o.TransactionalID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.TransactionalID != "" {
		if err := franzTxn(ctx, cl, o.Aborted, kgo.TryAbort); err != nil {
			return fmt.Errorf("aborted transaction: %w", err)
		}
		return franzTxn(ctx, cl, recs, kgo.TryCommit)
	}
	return franzProduce(ctx, cl, recs, o.Pace)
}

func franzTxn(ctx context.Context, cl *kgo.Client, recs []Record, end kgo.TransactionEndTry) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := franzProduce(ctx, cl, recs, 0); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, end)
}

func franzProduce(ctx context.Context, cl *kgo.Client, recs []Record, pace time.Duration) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for i, r := range recs {
		if err := pause(ctx, pace, i); err != nil {
			wg.Wait()
			return err
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(r.Key), Value: []byte(r.Value)}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	return first
}

func (d Franz) Consume(ctx context.Context, o ConsumeOpts) ([]Delivered, error) {
	opts, err := d.opts(o.Conn)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ConsumeTopics(o.Topic), kgo.ConsumerGroup(o.Group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if o.Faults {
		opts = append(opts, franzFaults...)
	}
	if o.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var (
		mu   sync.Mutex
		got  []Delivered
		seen = map[string]bool{}
		done = make(chan struct{})
		once sync.Once
	)
	members := max(o.Members, 1)
	var wg sync.WaitGroup
	var errs []error
	for m := range members {
		mopts := append([]kgo.Opt{}, opts...)
		if o.Protocol == "consumer" {
			// KIP-848 needs a balancer the broker implements.
			mopts = append(mopts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
		}
		cl, err := kgo.NewClient(mopts...)
		if err != nil {
			cancel()
			wg.Wait() // the members already started
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					return
				}
				select {
				case <-done:
					return
				default:
				}
				fs.EachError(func(t string, p int32, err error) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("member %d %s[%d]: %w", m, t, p, err))
					mu.Unlock()
				})
				mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					got = append(got, Delivered{Member: m, Partition: r.Partition, Key: string(r.Key), Value: string(r.Value), Traceparent: franzTraceparent(r.Headers)})
					seen[string(r.Key)] = true
				})
				if len(seen) >= o.Count {
					once.Do(func() { close(done) })
				}
				mu.Unlock()
				if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("member %d commit: %w", m, err))
					mu.Unlock()
				}
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < o.Count {
		return got, fmt.Errorf("%d of %d keys after %v: %w", len(seen), o.Count, o.Timeout, errors.Join(errs...))
	}
	return got, nil
}

func (d Franz) Admin(ctx context.Context, o AdminOpts) error {
	opts, err := d.opts(o.Conn)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, int32(o.Partitions), 1, nil, o.Topic); err != nil || r.Err != nil {
		return fmt.Errorf("create %s: %w", o.Topic, errors.Join(err, r.Err))
	}
	td, err := adm.ListTopics(ctx, o.Topic)
	if err != nil {
		return fmt.Errorf("describe %s: %w", o.Topic, err)
	}
	if n := len(td[o.Topic].Partitions); n != o.Partitions {
		return fmt.Errorf("describe %s: %d partitions, want %d", o.Topic, n, o.Partitions)
	}
	if r, err := adm.DeleteTopic(ctx, o.Topic); err != nil || r.Err != nil {
		return fmt.Errorf("delete %s: %w", o.Topic, errors.Join(err, r.Err))
	}
	return awaitGone(ctx, o.Topic, func() (bool, error) {
		td, err := adm.ListTopics(ctx)
		return td.Has(o.Topic), err
	})
}

// admin is a kadm client on c, and its closer.
func (d Franz) admin(c Conn) (*kadm.Client, func(), error) {
	opts, err := d.opts(c)
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

func (d Franz) CreateTopic(ctx context.Context, c Conn, topic string, partitions int) error {
	adm, done, err := d.admin(c)
	if err != nil {
		return err
	}
	defer done()
	r, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic)
	return franzTopicErr(err, r.Err, r.ErrMessage)
}

func (d Franz) DeleteTopic(ctx context.Context, c Conn, topic string) error {
	adm, done, err := d.admin(c)
	if err != nil {
		return err
	}
	defer done()
	r, err := adm.DeleteTopic(ctx, topic)
	return franzTopicErr(err, r.Err, r.ErrMessage)
}

// franzTopicErr is kadm's answer for one topic: the error code's error
// (kerr, its name first) with the broker's message kadm hands over in
// ErrMessage. kadm returns the code's error as err too.
func franzTopicErr(err, code error, msg string) error {
	switch {
	case code != nil && msg != "":
		return fmt.Errorf("%w (ErrMessage %q)", code, msg)
	case code != nil:
		return code
	}
	return err
}

func franzTraceparent(hs []kgo.RecordHeader) string {
	for _, h := range hs {
		if h.Key == "traceparent" {
			return string(h.Value)
		}
	}
	return ""
}
