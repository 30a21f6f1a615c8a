package proxy

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/sasl"
)

// lifetimeMs is the session lifetime kfake gives in these tests: kproxy
// re-authenticates at 85-95% of it.
const lifetimeMs = 2000

// longWaitMs is how long kfake holds a Fetch of an empty partition: well
// past the point where the re-authentication is due.
const longWaitMs = 6000

// longFetch is a Fetch of topic's empty partition 0 that the broker
// holds for longWaitMs.
func longFetch(topic string) *kmsg.FetchRequest {
	f := kmsg.NewPtrFetchRequest()
	f.Version = 11
	f.ReplicaID, f.MaxWaitMillis, f.MinBytes, f.MaxBytes = -1, longWaitMs, 1, 1<<20
	f.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.CurrentLeaderEpoch, fp.LogStartOffset, fp.PartitionMaxBytes = 0, -1, -1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	return f
}

func metadataV9(topic string) *kmsg.MetadataRequest {
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	return md
}

// readAnswer reads the next response on c, which must carry corr, and
// decodes it as req's.
func readAnswer(t testing.TB, c net.Conn, req kmsg.Request, corr int32) kmsg.Response {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	f, err := readFrame(c)
	if err != nil {
		t.Fatalf("waiting for the answer to %s #%d: %v", kmsg.NameForKey(req.Key()), corr, err)
	}
	if corrOf(f) != corr {
		t.Fatalf("got a response with correlation id %d, want %d (%s)", corrOf(f), corr, kmsg.NameForKey(req.Key()))
	}
	return decodeResponse(t, f, req.Key(), req.GetVersion())
}

// keyOrder records the API key of every request kfake receives, in order.
type keyOrder struct {
	mu   sync.Mutex
	keys []int16
}

func recordKeys(c *kfake.Cluster) *keyOrder {
	o := &keyOrder{}
	c.Control(func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		o.mu.Lock()
		o.keys = append(o.keys, kreq.Key())
		o.mu.Unlock()
		return nil, nil, false
	})
	return o
}

func (o *keyOrder) get() []int16 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int16(nil), o.keys...)
}

// sessionDue sleeps until the session of a connection authenticated
// before `at` is past the point where kproxy re-authenticates it.
func sessionDue(at time.Time) {
	time.Sleep(time.Until(at.Add(lifetimeMs * time.Millisecond)))
}

// TestSaslOriginLongFetchDelaysReauth: a Fetch the broker holds past the
// point where the session must be renewed delays the re-authentication,
// which must not lose the connection. The client's next request waits
// until the Fetch is answered; only then does kproxy send its
// SaslHandshake and SaslAuthenticate, and only after them the client's
// request. The client gets both answers, in order, with its own
// correlation ids, and the connection serves on. Over a TLS upstream
// (the stream driver) the tap cannot read the wire: what kfake received
// and what the client got are checked.
func TestSaslOriginLongFetchDelaysReauth(t *testing.T) {
	for _, upTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "netpoll", true: "tls-stream"}[upTLS], func(t *testing.T) {
			testLongFetchDelaysReauth(t, upTLS)
		})
	}
}

func testLongFetchDelaysReauth(t *testing.T, upTLS bool) {
	const topic = "slow"
	kopts := []kfake.Opt{kfake.SeedTopics(1, topic), kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "2000"})}
	var (
		tap *wireTap
		env *originEnv
	)
	if upTLS {
		env = startTLSOrigin(t, sasl.ScramSHA512, kopts, nil).originEnv
	} else {
		env = startOriginWith(t, sasl.ScramSHA512, rightPassword, kopts,
			originSetup{via: func(addr string) string { tap = startTap(t, addr); return tap.addr() }})
	}
	order := recordKeys(env.cluster)
	c := dialRaw(t, env.addr)
	fetch, md := longFetch(topic), metadataV9(topic)
	if _, err := c.Write(encodeRequest(fetch, 11)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the Fetch at the broker", func() bool { return env.keys(1) == 1 })
	// kproxy authenticated before it relayed the Fetch.
	sessionDue(time.Now())
	if _, err := c.Write(encodeRequest(md, 12)); err != nil {
		t.Fatal(err)
	}
	fr := readAnswer(t, c, fetch, 11).(*kmsg.FetchResponse)
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("Fetch answered %+v", fr.Topics)
	}
	mr := readAnswer(t, c, md, 12).(*kmsg.MetadataResponse)
	if len(mr.Topics) != 1 || mr.Topics[0].Topic == nil || *mr.Topics[0].Topic != topic {
		t.Fatalf("Metadata answered %+v", mr.Topics)
	}
	av := kmsg.NewPtrApiVersionsRequest() // the connection serves on
	if _, ok := roundTripKmsg(t, c, av, 13).(*kmsg.ApiVersionsResponse); !ok {
		t.Fatal("no ApiVersions answer after the re-authentication")
	}
	if n := env.auths("reauth", "ok"); n != 1 {
		t.Fatalf("%v re-authentications, want 1", n)
	}

	checkKeysAfterFetch(t, order.get())
	if tap != nil {
		checkWireOrder(t, tap)
	}
}

// checkWireOrder fails t unless, on the tap's only connection, kproxy's
// SaslHandshake follows the Fetch's answer and the client's Metadata
// follows kproxy's SaslAuthenticate.
func checkWireOrder(t testing.TB, tap *wireTap) {
	t.Helper()
	if n := tap.count(); n != 1 {
		t.Fatalf("kproxy opened %d upstream connections, want 1", n)
	}
	es := tap.events(0)
	fetchAt, answeredAt, handshakeAt, authAt, mdAt := -1, -1, -1, -1, -1
	var fetchCorr int32
	for i, e := range es {
		switch {
		case e.request && e.key == 1:
			fetchAt, fetchCorr = i, e.corr
		case !e.request && fetchAt >= 0 && e.corr == fetchCorr:
			answeredAt = i
		case e.request && e.key == 17 && fetchAt >= 0:
			handshakeAt = i
		case e.request && e.key == 36 && fetchAt >= 0:
			authAt = i
		case e.request && e.key == 3:
			mdAt = i
		}
	}
	switch {
	case fetchAt < 0 || answeredAt < 0 || handshakeAt < 0 || authAt < 0 || mdAt < 0:
		t.Fatalf("missing from the wire (fetch %d, its answer %d, handshake %d, authenticate %d, metadata %d): %s",
			fetchAt, answeredAt, handshakeAt, authAt, mdAt, eventsString(es))
	case handshakeAt < answeredAt:
		t.Fatalf("kproxy sent its SaslHandshake while the Fetch was in flight: %s", eventsString(es))
	case mdAt < authAt:
		t.Fatalf("the client's Metadata went before the re-authentication was done: %s", eventsString(es))
	}
}

// checkKeysAfterFetch fails t unless kfake received, from the Fetch on,
// kproxy's SaslHandshake and SaslAuthenticate and then the client's
// Metadata and ApiVersions.
func checkKeysAfterFetch(t testing.TB, keys []int16) {
	t.Helper()
	var after []int16
	for i, k := range keys {
		if k == 1 {
			after = keys[i:]
			break
		}
	}
	want := []int16{1, 17, 36, 36, 3, 18} // SCRAM: two SaslAuthenticate rounds
	if len(after) != len(want) {
		t.Fatalf("kfake received %v from the Fetch on, want %v", after, want)
	}
	for i := range want {
		if after[i] != want[i] {
			t.Fatalf("kfake received %v from the Fetch on, want %v", after, want)
		}
	}
}

// TestSaslOriginReauthAnswersStayOwn: kproxy's own re-authentication
// requests are answered to kproxy, never to the client: over several
// renewals the client receives exactly one frame per request it sent,
// each with its correlation id, and kproxy's in-flight gauge comes back
// to 0. Over a TLS upstream the stream driver relays the pair.
func TestSaslOriginReauthAnswersStayOwn(t *testing.T) {
	for _, upTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "netpoll", true: "tls-stream"}[upTLS], func(t *testing.T) {
			testReauthAnswersStayOwn(t, upTLS)
		})
	}
}

func testReauthAnswersStayOwn(t *testing.T, upTLS bool) {
	const topic = "own"
	env := startReauthOrigin(t, topic, upTLS)
	c := dialRaw(t, env.addr)
	sent, got := 0, 0
	deadline := time.Now().Add(time.Minute)
	for env.auths("reauth", "ok") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%v re-authentications after %d requests", env.auths("reauth", "ok"), sent)
		}
		var req kmsg.Request = kmsg.NewPtrApiVersionsRequest()
		if sent%2 == 1 {
			req = metadataV9(topic)
		}
		corr := int32(100 + sent)
		if _, err := c.Write(encodeRequest(req, corr)); err != nil {
			t.Fatal(err)
		}
		sent++
		readAnswer(t, c, req, corr)
		got++
		time.Sleep(100 * time.Millisecond)
	}
	// Nothing more arrives: no answer of kproxy's own behind the last.
	c.SetReadDeadline(time.Now().Add(time.Second))
	if f, err := readFrame(c); err == nil {
		t.Fatalf("an extra frame (correlation id %d) after %d answers to %d requests", corrOf(f), got, sent)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("the connection closed after %d requests: %v", sent, err)
	}
	if got != sent {
		t.Fatalf("%d frames for %d requests", got, sent)
	}
	waitFor(t, 10*time.Second, "kproxy_in_flight_requests back to 0", func() bool {
		return testutil.ToFloat64(env.m.Relay.InFlight) == 0
	})
	if own := env.keys(17); own < 4 { // the initial one and three renewals
		t.Fatalf("kfake saw %d SaslHandshake", own)
	}
}

// TestSaslOriginDrainDuringReauthWait: kproxy drains while a connection's
// re-authentication waits for a long Fetch. The Fetch is answered, the
// request held behind the re-authentication is never sent (the client
// retries it elsewhere), the pair closes, and the drain ends before its
// deadline. Over a TLS upstream the stream driver relays the pair.
func TestSaslOriginDrainDuringReauthWait(t *testing.T) {
	for _, upTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "netpoll", true: "tls-stream"}[upTLS], func(t *testing.T) {
			testDrainDuringReauthWait(t, upTLS)
		})
	}
}

func testDrainDuringReauthWait(t *testing.T, upTLS bool) {
	const topic = "drain"
	kopts := []kfake.Opt{kfake.SeedTopics(1, topic), kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "2000"})}
	env := startOriginOn(t, upTLS, sasl.ScramSHA512, kopts, originSetup{})
	c := dialRaw(t, env.addr)
	fetch, md := longFetch(topic), metadataV9(topic)
	if _, err := c.Write(encodeRequest(fetch, 21)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the Fetch at the broker", func() bool { return env.keys(1) == 1 })
	// kproxy authenticated before it relayed the Fetch.
	sessionDue(time.Now())
	if _, err := c.Write(encodeRequest(md, 22)); err != nil {
		t.Fatal(err)
	}
	// The relay waits for the table to empty before re-authenticating.
	// The stream driver's waits leave no mark: give it a moment (were
	// the Metadata not read yet, the drain would refuse it all the same).
	waitFor(t, 10*time.Second, "the relay waiting for the Fetch", func() bool {
		if upTLS {
			time.Sleep(300 * time.Millisecond)
			return true
		}
		for _, p := range env.pairs() {
			if p.Waiting() {
				return true
			}
		}
		return false
	})
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		drained <- env.srv.Drain(ctx)
	}()
	readAnswer(t, c, fetch, 21)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if f, err := readFrame(c); err == nil {
		t.Fatalf("after the Fetch's answer, a frame with correlation id %d: want the drained connection closed", corrOf(f))
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the drained connection is still open")
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Drain did not return")
	}
	if n := env.keys(3); n != 0 {
		t.Fatalf("the Metadata held behind the re-authentication reached the broker (%d) after the drain began", n)
	}
	if n := env.auths("reauth", "error"); n != 0 {
		t.Fatalf("the drain counted %v failed re-authentications", n)
	}
	if err := env.srv.sasl.Ready(); err != nil {
		t.Fatalf("the drain left the originator failing: %v", err)
	}
	waitFor(t, 10*time.Second, "kproxy_in_flight_requests back to 0", func() bool {
		return testutil.ToFloat64(env.m.Relay.InFlight) == 0
	})
}
