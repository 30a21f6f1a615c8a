package proxy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/sasl"
)

// TestReauthPipelinedAndNoAck: while kproxy re-authenticates its upstream
// connections every second or so, a raw client that pipelines bursts of
// requests gets every answer, in order, in its own correlation ids, and
// none of kproxy's own (no SaslHandshake or SaslAuthenticate answer); an
// acks=0 producer loses no record (its connection is never dropped).
func TestReauthPipelinedAndNoAck(t *testing.T) {
	env := startOrigin(t, sasl.ScramSHA256, rightPassword, []kfake.Opt{kfake.SeedTopics(1, "noack"),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "1000"})})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const records = 400
	var wg sync.WaitGroup
	wg.Add(1)
	prodErr := make(chan error, 1)
	go func() { // the acks=0 producer, spread over the re-authentications
		defer wg.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.DefaultProduceTopic("noack"),
			kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
		if err != nil {
			prodErr <- err
			return
		}
		defer cl.Close()
		for i := 0; i < records; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: keyOf(i), Value: valueOf(i)}).FirstErr(); err != nil {
				prodErr <- err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		prodErr <- nil
	}()

	c := dialRaw(t, env.addr)
	corr := int32(-5) // opaque ids, negative ones included
	for env.auths("reauth", "ok") < 4 {
		if ctx.Err() != nil {
			t.Fatalf("%v re-authentications before the deadline", env.auths("reauth", "ok"))
		}
		var want []int32
		var keys []int16
		var burst []byte
		for i := 0; i < 16; i++ {
			var req kmsg.Request
			if i%2 == 0 {
				r := kmsg.NewPtrApiVersionsRequest()
				req = r
			} else {
				r := kmsg.NewPtrMetadataRequest()
				r.Version = 1
				req = r
			}
			burst = append(burst, encodeRequest(req, corr)...)
			want, keys = append(want, corr), append(keys, req.Key())
			corr++
		}
		if _, err := c.Write(burst); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for i, id := range want {
			f, err := readFrame(c)
			if err != nil {
				t.Fatalf("answer %d of a burst: %v", i, err)
			}
			if got := corrOf(f); got != id {
				t.Fatalf("answer %d has id %d, want %d (an answer out of order, or one of kproxy's own)", i, got, id)
			}
			decodeResponse(t, f, keys[i], map[int16]int16{18: 0, 3: 1}[keys[i]])
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	if err := <-prodErr; err != nil {
		t.Fatalf("acks=0 producer: %v", err)
	}
	if e := env.auths("reauth", "error"); e != 0 {
		t.Fatalf("%v re-authentications failed", e)
	}
	// Every acks=0 record reached the broker.
	cl, err := kgo.NewClient(kgo.SeedBrokers(env.addr), kgo.ConsumeTopics("noack"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	l := newLedger()
	for len(l.seen) < records {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d acks=0 records", len(l.seen), records)
		}
		fs.EachRecord(func(r *kgo.Record) { l.add(r.Key, r.Value) })
	}
}
