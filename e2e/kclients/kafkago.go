package kclients

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// KafkaGo drives github.com/segmentio/kafka-go.
type KafkaGo struct{ Version string }

func (d KafkaGo) Name() string { return "segmentio/kafka-go " + d.Version }

func (KafkaGo) Unsupported(f Feature) string {
	switch f {
	case Transactions, Idempotence:
		return "kafka-go's Writer writes record batches without a producer id: no idempotent or transactional produce"
	case KIP848:
		return "kafka-go implements only the classic consumer group protocol (no KIP-848)"
	case ClientMetrics:
		return "kafka-go implements no client metrics push (KIP-714)"
	case RackFetch:
		return "kafka-go's Reader fetches with Fetch v10 at most, which has no rack_id (KIP-392 needs v11)"
	}
	return ""
}

func (KafkaGo) mechanism(c Conn) (sasl.Mechanism, error) {
	switch c.SASL.Mechanism {
	case "":
		return nil, nil
	case "PLAIN":
		return plain.Mechanism{Username: c.SASL.User, Password: c.SASL.Password}, nil
	case "SCRAM-SHA-512":
		return scram.Mechanism(scram.SHA512, c.SASL.User, c.SASL.Password)
	}
	return nil, fmt.Errorf("kafka-go: SASL mechanism %q", c.SASL.Mechanism)
}

func (d KafkaGo) transport(c Conn) (*kafka.Transport, error) {
	m, err := d.mechanism(c)
	if err != nil {
		return nil, err
	}
	tc, err := c.TLS.Config()
	if err != nil {
		return nil, err
	}
	return &kafka.Transport{SASL: m, TLS: tc, ClientID: "kproxy-e2e-kafka-go", DialTimeout: 10 * time.Second}, nil
}

func kafkaGoCodec(name string) (kafka.Compression, error) {
	switch name {
	case "", "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("unknown compression %q", name)
}

func (d KafkaGo) Produce(ctx context.Context, o ProduceOpts, recs []Record) error {
	if o.Idempotent || o.TransactionalID != "" {
		return errors.New("kafka-go: " + d.Unsupported(Transactions))
	}
	tr, err := d.transport(o.Conn)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	codec, err := kafkaGoCodec(o.Compression)
	if err != nil {
		return err
	}
	w := &kafka.Writer{
		Addr:         kafka.TCP(o.Bootstrap),
		Topic:        o.Topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		Compression:  codec,
		BatchSize:    len(recs),
		BatchTimeout: 20 * time.Millisecond,
		Transport:    tr,
	}
	switch o.Acks {
	case "1":
		w.RequiredAcks = kafka.RequireOne
	case "0":
		w.RequiredAcks = kafka.RequireNone
	}
	msgs := make([]kafka.Message, len(recs))
	for i, r := range recs {
		msgs[i] = kafka.Message{Key: []byte(r.Key), Value: []byte(r.Value)}
	}
	if o.Pace > 0 {
		// One record per write: WriteMessages returns once its records
		// are acknowledged, so the Writer keeps its connection busy.
		for i := range msgs {
			if err = pause(ctx, o.Pace, i); err == nil {
				err = w.WriteMessages(ctx, msgs[i])
			}
			if err != nil {
				break
			}
		}
	} else {
		err = w.WriteMessages(ctx, msgs...)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) {
		return fmt.Errorf("%d of %d records failed: %w", werrs.Count(), len(recs), err)
	}
	return err
}

func (d KafkaGo) Consume(ctx context.Context, o ConsumeOpts) ([]Delivered, error) {
	if o.Protocol == "consumer" {
		return nil, errors.New("kafka-go: " + d.Unsupported(KIP848))
	}
	m, err := d.mechanism(o.Conn)
	if err != nil {
		return nil, err
	}
	tc, err := o.TLS.Config()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	coll := newGroupCollector(o.Count)
	iso := kafka.ReadUncommitted
	if o.ReadCommitted {
		iso = kafka.ReadCommitted
	}
	var wg sync.WaitGroup
	for n := range max(o.Members, 1) {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:        []string{o.Bootstrap},
			GroupID:        o.Group,
			Topic:          o.Topic,
			Dialer:         &kafka.Dialer{ClientID: "kproxy-e2e-kafka-go", Timeout: 10 * time.Second, SASLMechanism: m, TLS: tc},
			StartOffset:    kafka.FirstOffset,
			IsolationLevel: iso,
			// kafka-go gives a Fetch a read deadline of MaxWait and asks
			// the broker to wait MaxWait less its guess at the round
			// trip: a quarter of MaxWait below 1s, else 1s. At 500ms a
			// Fetch answered 125ms late (a loaded JVM, any hop) made
			// kafka-go drop the connection and redial; 1.5s leaves the
			// second of slack its default (10s) does, and the broker
			// waits 500ms, which a closing reader waits out.
			MaxWait:           1500 * time.Millisecond,
			HeartbeatInterval: time.Second,
			JoinGroupBackoff:  500 * time.Millisecond,
			// Commit synchronously, as each batch is processed below.
			CommitInterval: 0,
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if err := r.Close(); err != nil {
					coll.fail(fmt.Errorf("member %d close: %w", n, err))
				}
			}()
			for {
				msg, err := r.FetchMessage(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					coll.fail(fmt.Errorf("member %d: %w", n, err))
					time.Sleep(200 * time.Millisecond)
					continue
				}
				coll.add(Delivered{Member: n, Partition: int32(msg.Partition), Key: string(msg.Key), Value: string(msg.Value), Traceparent: kafkagoTraceparent(msg.Headers)})
				if err := r.CommitMessages(ctx, msg); err != nil && ctx.Err() == nil {
					coll.fail(fmt.Errorf("member %d commit: %w", n, err))
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

func (d KafkaGo) Admin(ctx context.Context, o AdminOpts) error {
	tr, err := d.transport(o.Conn)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(o.Bootstrap), Transport: tr, Timeout: 30 * time.Second}
	cr, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: o.Topic, NumPartitions: o.Partitions, ReplicationFactor: 1}}})
	if err == nil {
		err = cr.Errors[o.Topic]
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", o.Topic, err)
	}
	err = awaitDescribed(ctx, o.Topic, o.Partitions, func() (int, error) {
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{o.Topic}})
		switch {
		case err != nil:
			return 0, err
		case len(md.Topics) != 1:
			return 0, fmt.Errorf("%d topics described", len(md.Topics))
		case md.Topics[0].Error != nil:
			return 0, md.Topics[0].Error
		}
		return len(md.Topics[0].Partitions), nil
	})
	if err != nil {
		return err
	}
	dr, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{o.Topic}})
	if err == nil {
		err = dr.Errors[o.Topic]
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", o.Topic, err)
	}
	return awaitGone(ctx, o.Topic, func() (bool, error) {
		// A nil topic list asks for every topic.
		md, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
		if err != nil {
			return false, err
		}
		return kafkaGoListed(md.Topics, o.Topic), nil
	})
}

func (d KafkaGo) CreateTopic(ctx context.Context, c Conn, topic string, partitions int) error {
	cl, done, err := d.client(c)
	if err != nil {
		return err
	}
	defer done()
	r, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}}})
	if err != nil {
		return err
	}
	// A kafka.Error, wrapped with the broker's message when it sent one.
	return r.Errors[topic]
}

func (d KafkaGo) DeleteTopic(ctx context.Context, c Conn, topic string) error {
	cl, done, err := d.client(c)
	if err != nil {
		return err
	}
	defer done()
	r, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err != nil {
		return err
	}
	return r.Errors[topic]
}

// client is a kafka-go Client on c, and its closer.
func (d KafkaGo) client(c Conn) (*kafka.Client, func(), error) {
	tr, err := d.transport(c)
	if err != nil {
		return nil, nil, err
	}
	return &kafka.Client{Addr: kafka.TCP(c.Bootstrap), Transport: tr, Timeout: 30 * time.Second}, tr.CloseIdleConnections, nil
}

func kafkaGoListed(ts []kafka.Topic, topic string) bool {
	for _, t := range ts {
		if t.Name == topic {
			return true
		}
	}
	return false
}

func kafkagoTraceparent(hs []kafka.Header) string {
	for _, h := range hs {
		if h.Key == "traceparent" {
			return string(h.Value)
		}
	}
	return ""
}
