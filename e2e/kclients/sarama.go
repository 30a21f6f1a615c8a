package kclients

import (
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// Sarama drives github.com/IBM/sarama. Sarama does not negotiate request
// versions: it speaks those of its configured Kafka version, here 3.9,
// which every broker the suite runs (3.9 and 4.x) serves.
type Sarama struct{ Version string }

func (d Sarama) Name() string { return "IBM/sarama " + d.Version }

func (Sarama) Unsupported(f Feature) string {
	switch f {
	case KIP848:
		return "sarama implements only the classic consumer group protocol (no KIP-848)"
	case ClientMetrics:
		return "sarama implements no client metrics push (KIP-714)"
	}
	return ""
}

func (Sarama) config(c Conn) (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_9_0_0
	cfg.ClientID = "kproxy-e2e-sarama"
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	tc, err := c.TLS.Config()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tc
	}
	switch c.SASL.Mechanism {
	case "":
		return cfg, nil
	case "PLAIN":
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	case "SCRAM-SHA-512":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaScram{} }
	default:
		return nil, fmt.Errorf("sarama: SASL mechanism %q", c.SASL.Mechanism)
	}
	cfg.Net.SASL.Enable = true
	cfg.Net.SASL.Handshake = true
	cfg.Net.SASL.Version = sarama.SASLHandshakeV1
	cfg.Net.SASL.User = c.SASL.User
	cfg.Net.SASL.Password = c.SASL.Password
	return cfg, nil
}

// saramaScram is sarama's SCRAM-SHA-512 client, on github.com/xdg-go/scram.
type saramaScram struct{ conv *scram.ClientConversation }

func (s *saramaScram) Begin(user, password, authzID string) error {
	c, err := scram.HashGeneratorFcn(sha512.New).NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *saramaScram) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaScram) Done() bool                            { return s.conv.Done() }

func saramaCodec(name string) (sarama.CompressionCodec, error) {
	switch name {
	case "", "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return sarama.CompressionNone, fmt.Errorf("unknown compression %q", name)
}

func (d Sarama) Produce(ctx context.Context, o ProduceOpts, recs []Record) error {
	cfg, err := d.config(o.Conn)
	if err != nil {
		return err
	}
	if cfg.Producer.Compression, err = saramaCodec(o.Compression); err != nil {
		return err
	}
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	switch o.Acks {
	case "all":
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	case "1":
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	case "0":
		cfg.Producer.RequiredAcks = sarama.NoResponse
	default:
		return fmt.Errorf("sarama: unknown acks %q", o.Acks)
	}
	if o.Idempotent || o.TransactionalID != "" {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	if o.TransactionalID != "" {
		cfg.Producer.Transaction.ID = o.TransactionalID
	}
	cl, err := sarama.NewClient([]string{o.Bootstrap}, cfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := sarama.NewAsyncProducerFromClient(cl)
	if err != nil {
		return err
	}
	defer p.Close()
	if o.TransactionalID == "" {
		return saramaSend(ctx, p, o.Topic, recs, o.Pace)
	}
	if err := saramaTxn(ctx, p, o.Topic, o.Aborted, p.AbortTxn); err != nil {
		return fmt.Errorf("aborted transaction: %w", err)
	}
	return saramaTxn(ctx, p, o.Topic, recs, p.CommitTxn)
}

func saramaTxn(ctx context.Context, p sarama.AsyncProducer, topic string, recs []Record, end func() error) error {
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := saramaSend(ctx, p, topic, recs, 0); err != nil {
		return err
	}
	return end()
}

// saramaSend sends recs and waits for each one's success or error.
func saramaSend(ctx context.Context, p sarama.AsyncProducer, topic string, recs []Record, pace time.Duration) error {
	var errs []error
	pending := 0
	collect := func(block bool) error {
		if !block {
			select {
			case <-p.Successes():
				pending--
			case pe := <-p.Errors():
				pending--
				errs = append(errs, pe)
			default:
			}
			return nil
		}
		select {
		case <-p.Successes():
			pending--
		case pe := <-p.Errors():
			pending--
			errs = append(errs, pe)
		case <-ctx.Done():
			return fmt.Errorf("%d records unacknowledged: %w", pending, ctx.Err())
		}
		return nil
	}
	for i, r := range recs {
		if err := pause(ctx, pace, i); err != nil {
			return err
		}
		m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(r.Key), Value: sarama.StringEncoder(r.Value)}
		for sent := false; !sent; {
			select {
			case p.Input() <- m:
				sent = true
				pending++
			case <-p.Successes():
				pending--
			case pe := <-p.Errors():
				pending--
				errs = append(errs, pe)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		_ = collect(false)
	}
	for pending > 0 {
		if err := collect(true); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d records failed: %w", len(errs), len(recs), errs[0])
	}
	return nil
}

// saramaMember is one member's handler; it records what it receives and
// marks it for the next commit.
type saramaMember struct {
	m    int
	coll *groupCollector
}

func (*saramaMember) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*saramaMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-c.Messages():
			if !ok {
				return nil
			}
			h.coll.add(Delivered{Member: h.m, Partition: msg.Partition, Key: string(msg.Key), Value: string(msg.Value), Traceparent: saramaTraceparent(msg.Headers)})
			s.MarkMessage(msg, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

func (d Sarama) Consume(ctx context.Context, o ConsumeOpts) ([]Delivered, error) {
	if o.Protocol == "consumer" {
		return nil, errors.New("sarama: " + d.Unsupported(KIP848))
	}
	cfg, err := d.config(o.Conn)
	if err != nil {
		return nil, err
	}
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	if o.ReadCommitted {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	coll := newGroupCollector(o.Count)
	var wg sync.WaitGroup
	for m := range max(o.Members, 1) {
		g, err := sarama.NewConsumerGroup([]string{o.Bootstrap}, o.Group, cfg)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, fmt.Errorf("member %d: %w", m, err)
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			for err := range g.Errors() {
				coll.fail(fmt.Errorf("member %d: %w", m, err))
			}
		}()
		go func() {
			defer wg.Done()
			defer func() {
				if err := g.Close(); err != nil {
					coll.fail(fmt.Errorf("member %d close: %w", m, err))
				}
			}()
			h := &saramaMember{m: m, coll: coll}
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{o.Topic}, h); err != nil && ctx.Err() == nil {
					coll.fail(fmt.Errorf("member %d: %w", m, err))
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	select {
	case <-coll.done:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	return coll.result(o.Timeout)
}

func (d Sarama) Admin(ctx context.Context, o AdminOpts) error {
	cfg, err := d.config(o.Conn)
	if err != nil {
		return err
	}
	adm, err := sarama.NewClusterAdmin([]string{o.Bootstrap}, cfg)
	if err != nil {
		return err
	}
	defer adm.Close()
	if err := adm.CreateTopic(o.Topic, &sarama.TopicDetail{NumPartitions: int32(o.Partitions), ReplicationFactor: 1}, false); err != nil {
		return fmt.Errorf("create %s: %w", o.Topic, err)
	}
	err = awaitDescribed(ctx, o.Topic, o.Partitions, func() (int, error) {
		md, err := adm.DescribeTopics([]string{o.Topic})
		switch {
		case err != nil:
			return 0, err
		case len(md) != 1:
			return 0, fmt.Errorf("%d topics described", len(md))
		case md[0].Err != sarama.ErrNoError:
			return 0, md[0].Err
		}
		return len(md[0].Partitions), nil
	})
	if err != nil {
		return err
	}
	if err := adm.DeleteTopic(o.Topic); err != nil {
		return fmt.Errorf("delete %s: %w", o.Topic, err)
	}
	return awaitGone(ctx, o.Topic, func() (bool, error) {
		ts, err := adm.ListTopics()
		if err != nil {
			return false, err
		}
		_, ok := ts[o.Topic]
		return ok, nil
	})
}

func (d Sarama) CreateTopic(ctx context.Context, c Conn, topic string, partitions int) error {
	adm, err := d.admin(c)
	if err != nil {
		return err
	}
	defer adm.Close()
	// A *sarama.TopicError: the code's error and the broker's ErrMsg.
	return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(partitions), ReplicationFactor: 1}, false)
}

func (d Sarama) DeleteTopic(ctx context.Context, c Conn, topic string) error {
	adm, err := d.admin(c)
	if err != nil {
		return err
	}
	defer adm.Close()
	return adm.DeleteTopic(topic)
}

func (d Sarama) admin(c Conn) (sarama.ClusterAdmin, error) {
	cfg, err := d.config(c)
	if err != nil {
		return nil, err
	}
	return sarama.NewClusterAdmin([]string{c.Bootstrap}, cfg)
}

func saramaTraceparent(hs []*sarama.RecordHeader) string {
	for _, h := range hs {
		if string(h.Key) == "traceparent" {
			return string(h.Value)
		}
	}
	return ""
}
