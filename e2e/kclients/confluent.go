package kclients

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Confluent drives github.com/confluentinc/confluent-kafka-go/v2, the Go
// binding of librdkafka (bundled, linked with cgo).
type Confluent struct{ Version string }

func (d Confluent) Name() string {
	_, lib := kafka.LibraryVersion()
	return fmt.Sprintf("confluent-kafka-go %s (librdkafka %s)", d.Version, lib)
}

func (Confluent) Unsupported(Feature) string { return "" }

// rdLog keeps librdkafka's log off the test output: it keeps the last
// warnings and errors, to add to an error.
type rdLog struct {
	ch   chan kafka.LogEvent
	mu   sync.Mutex
	last []string
	done chan struct{}
}

func newRDLog() *rdLog {
	l := &rdLog{ch: make(chan kafka.LogEvent, 1000), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for e := range l.ch {
			if e.Level > 4 { // keep warnings (4) and worse
				continue
			}
			l.mu.Lock()
			l.last = append(l.last, fmt.Sprintf("%s %s: %s", e.Name, e.Tag, e.Message))
			if len(l.last) > 8 {
				l.last = l.last[1:]
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// close ends the log once its client is closed (confluent-kafka-go does
// not close a log channel it was given).
func (l *rdLog) close() {
	close(l.ch)
	<-l.done
}

// wrap adds the last warnings librdkafka logged to err.
func (l *rdLog) wrap(err error) error {
	if err == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.last) == 0 {
		return err
	}
	return fmt.Errorf("%w (librdkafka log: %s)", err, strings.Join(l.last, " | "))
}

func (Confluent) config(c Conn, log *rdLog) (kafka.ConfigMap, error) {
	m := kafka.ConfigMap{
		"bootstrap.servers":      c.Bootstrap,
		"client.id":              "kproxy-e2e-confluent",
		"go.logs.channel.enable": true,
		"go.logs.channel":        log.ch,
	}
	if c.TLS.On() {
		// librdkafka verifies the broker's name (IP addresses included)
		// by default since 2.0.
		m["security.protocol"] = "SSL"
		m["ssl.ca.location"] = c.TLS.CAFile
		if c.TLS.CertFile != "" {
			m["ssl.certificate.location"] = c.TLS.CertFile
			m["ssl.key.location"] = c.TLS.KeyFile
		}
	}
	switch c.SASL.Mechanism {
	case "":
		return m, nil
	case "PLAIN", "SCRAM-SHA-512":
		m["security.protocol"] = "SASL_PLAINTEXT"
		if c.TLS.On() {
			m["security.protocol"] = "SASL_SSL"
		}
		m["sasl.mechanisms"] = c.SASL.Mechanism
		m["sasl.username"] = c.SASL.User
		m["sasl.password"] = c.SASL.Password
		return m, nil
	}
	return nil, fmt.Errorf("confluent-kafka-go: SASL mechanism %q", c.SASL.Mechanism)
}

func (d Confluent) Produce(ctx context.Context, o ProduceOpts, recs []Record) (err error) {
	log := newRDLog()
	defer func() { err = log.wrap(err) }()
	cfg, err := d.config(o.Conn, log)
	if err != nil {
		return err
	}
	compression := o.Compression
	if compression == "" {
		compression = "none"
	}
	cfg["compression.type"] = compression
	cfg["linger.ms"] = 5
	switch o.Acks {
	case "all", "1", "0":
		cfg["acks"] = o.Acks
	default:
		return fmt.Errorf("confluent-kafka-go: unknown acks %q", o.Acks)
	}
	cfg["enable.idempotence"] = o.Idempotent || o.TransactionalID != ""
	if o.TransactionalID != "" {
		cfg["transactional.id"] = o.TransactionalID
	}
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		return err
	}
	defer func() {
		p.Close()
		log.close()
	}()
	// Errors not tied to one record (a fatal idempotence error, say).
	var (
		emu  sync.Mutex
		errs []error
	)
	go func() {
		for ev := range p.Events() {
			if e, ok := ev.(kafka.Error); ok && e.IsFatal() {
				emu.Lock()
				errs = append(errs, e)
				emu.Unlock()
			}
		}
	}()
	fatal := func() error {
		emu.Lock()
		defer emu.Unlock()
		return errors.Join(errs...)
	}
	if o.TransactionalID == "" {
		if err := confluentSend(ctx, p, o.Topic, recs, o.Pace); err != nil {
			return errors.Join(err, fatal())
		}
		return fatal()
	}
	if err := p.InitTransactions(ctx); err != nil {
		return fmt.Errorf("init transactions: %w", err)
	}
	if err := p.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := confluentSend(ctx, p, o.Topic, o.Aborted, 0); err != nil {
		return fmt.Errorf("aborted transaction: %w", err)
	}
	if err := p.AbortTransaction(ctx); err != nil {
		return fmt.Errorf("abort: %w", err)
	}
	if err := p.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := confluentSend(ctx, p, o.Topic, recs, 0); err != nil {
		return err
	}
	if err := p.CommitTransaction(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return fatal()
}

// confluentSend produces recs and waits for each one's delivery report.
func confluentSend(ctx context.Context, p *kafka.Producer, topic string, recs []Record, pace time.Duration) error {
	reports := make(chan kafka.Event, len(recs))
	for i, r := range recs {
		if err := pause(ctx, pace, i); err != nil {
			return err
		}
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: []byte(r.Key), Value: []byte(r.Value)}
		for {
			err := p.Produce(m, reports)
			if err == nil {
				break
			}
			var ke kafka.Error
			if !errors.As(err, &ke) || ke.Code() != kafka.ErrQueueFull || ctx.Err() != nil {
				return fmt.Errorf("produce %s: %w", r.Key, err)
			}
			p.Flush(100)
		}
	}
	var errs []error
	failed := 0
	for range recs {
		select {
		case ev := <-reports:
			m, ok := ev.(*kafka.Message)
			switch {
			case !ok:
				failed++
				errs = append(errs, fmt.Errorf("unexpected event %v", ev))
			case m.TopicPartition.Error != nil:
				failed++
				if len(errs) < 5 {
					errs = append(errs, fmt.Errorf("%s: %w", m.Key, m.TopicPartition.Error))
				}
			}
		case <-ctx.Done():
			return fmt.Errorf("waiting for delivery reports: %w", ctx.Err())
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d records failed: %w", failed, len(recs), errors.Join(errs...))
	}
	return nil
}

func (d Confluent) Consume(ctx context.Context, o ConsumeOpts) ([]Delivered, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	coll := newGroupCollector(o.Count)
	var (
		wg   sync.WaitGroup
		logs []*rdLog
	)
	for n := range max(o.Members, 1) {
		log := newRDLog()
		logs = append(logs, log)
		cfg, err := d.config(o.Conn, log)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		cfg["group.id"] = o.Group
		cfg["auto.offset.reset"] = "earliest"
		// Commit every 200ms the offsets of the records handed to us.
		cfg["enable.auto.commit"] = true
		cfg["auto.commit.interval.ms"] = 200
		cfg["enable.auto.offset.store"] = false
		cfg["isolation.level"] = "read_uncommitted"
		if o.ReadCommitted {
			cfg["isolation.level"] = "read_committed"
		}
		if o.Protocol == "consumer" {
			cfg["group.protocol"] = "consumer"
		}
		c, err := kafka.NewConsumer(&cfg)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, fmt.Errorf("member %d: %w", n, err)
		}
		if err := c.Subscribe(o.Topic, nil); err != nil {
			c.Close()
			cancel()
			wg.Wait()
			return nil, fmt.Errorf("member %d subscribe: %w", n, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// Close commits the stored offsets and leaves the group.
				if err := c.Close(); err != nil {
					coll.fail(fmt.Errorf("member %d close: %w", n, err))
				}
				log.close()
			}()
			for ctx.Err() == nil {
				switch ev := c.Poll(100).(type) {
				case *kafka.Message:
					if ev.TopicPartition.Error != nil {
						coll.fail(fmt.Errorf("member %d: %w", n, ev.TopicPartition.Error))
						continue
					}
					coll.add(Delivered{Member: n, Partition: ev.TopicPartition.Partition, Key: string(ev.Key), Value: string(ev.Value), Traceparent: confluentTraceparent(ev.Headers)})
					if _, err := c.StoreMessage(ev); err != nil {
						coll.fail(fmt.Errorf("member %d store offset: %w", n, err))
					}
				case kafka.Error:
					coll.fail(fmt.Errorf("member %d: %w", n, ev))
				}
				select {
				case <-coll.done:
					return
				default:
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
	got, err := coll.result(o.Timeout)
	for _, l := range logs {
		err = l.wrap(err)
	}
	return got, err
}

// admin is an admin client on c with its log, and its closer.
func (d Confluent) admin(c Conn) (*kafka.AdminClient, *rdLog, func(), error) {
	log := newRDLog()
	cfg, err := d.config(c, log)
	if err != nil {
		log.close()
		return nil, nil, nil, err
	}
	// An admin client of its own takes no log channel: derive it from a
	// producer, which does.
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		log.close()
		return nil, nil, nil, err
	}
	a, err := kafka.NewAdminClientFromProducer(p)
	if err != nil {
		p.Close()
		log.close()
		return nil, nil, nil, err
	}
	return a, log, func() {
		a.Close()
		p.Close()
		log.close()
	}, nil
}

func (d Confluent) Admin(ctx context.Context, o AdminOpts) (err error) {
	a, log, done, err := d.admin(o.Conn)
	if err != nil {
		return err
	}
	defer done()
	defer func() { err = log.wrap(err) }()
	rs, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: o.Topic, NumPartitions: o.Partitions, ReplicationFactor: 1}},
		kafka.SetAdminOperationTimeout(30*time.Second))
	if err == nil && len(rs) == 1 && rs[0].Error.Code() != kafka.ErrNoError {
		err = rs[0].Error
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", o.Topic, err)
	}
	err = awaitDescribed(ctx, o.Topic, o.Partitions, func() (int, error) {
		r, err := a.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames([]string{o.Topic}))
		switch {
		case err != nil:
			return 0, err
		case len(r.TopicDescriptions) != 1:
			return 0, fmt.Errorf("%d topics described", len(r.TopicDescriptions))
		case r.TopicDescriptions[0].Error.Code() != kafka.ErrNoError:
			return 0, r.TopicDescriptions[0].Error
		}
		return len(r.TopicDescriptions[0].Partitions), nil
	})
	if err != nil {
		return err
	}
	rs, err = a.DeleteTopics(ctx, []string{o.Topic}, kafka.SetAdminOperationTimeout(30*time.Second))
	if err == nil && len(rs) == 1 && rs[0].Error.Code() != kafka.ErrNoError {
		err = rs[0].Error
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", o.Topic, err)
	}
	return awaitGone(ctx, o.Topic, func() (bool, error) {
		md, err := a.GetMetadata(nil, true, 5000)
		if err != nil {
			return false, err
		}
		_, ok := md.Topics[o.Topic]
		return ok, nil
	})
}

func (d Confluent) CreateTopic(ctx context.Context, c Conn, topic string, partitions int) error {
	a, _, done, err := d.admin(c)
	if err != nil {
		return err
	}
	defer done()
	rs, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}},
		kafka.SetAdminOperationTimeout(30*time.Second))
	return confluentTopicErr(rs, err)
}

func (d Confluent) DeleteTopic(ctx context.Context, c Conn, topic string) error {
	a, _, done, err := d.admin(c)
	if err != nil {
		return err
	}
	defer done()
	rs, err := a.DeleteTopics(ctx, []string{topic}, kafka.SetAdminOperationTimeout(30*time.Second))
	return confluentTopicErr(rs, err)
}

// confluentTopicErr is the one topic's result: librdkafka's error string
// for it (the broker's message when it sent one) after the code's
// description and number.
func confluentTopicErr(rs []kafka.TopicResult, err error) error {
	switch {
	case err != nil:
		return err
	case len(rs) != 1:
		return fmt.Errorf("%d topic results, want 1", len(rs))
	case rs[0].Error.Code() == kafka.ErrNoError:
		return nil
	}
	return fmt.Errorf("%s (code %d): %w", rs[0].Error.Code(), int(rs[0].Error.Code()), rs[0].Error)
}

func confluentTraceparent(hs []kafka.Header) string {
	for _, h := range hs {
		if h.Key == "traceparent" {
			return string(h.Value)
		}
	}
	return ""
}
