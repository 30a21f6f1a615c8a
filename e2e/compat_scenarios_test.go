package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/kproxy/kproxy/e2e/kclients"
)

// scenario is one matrix column.
type scenario struct {
	name  string
	needs []kclients.Feature
	core  bool // also run against the older brokers
	sasl  string
	tls   string // "tls" or "mtls": a TLS cell (compat_tls_test.go)
	// cluster cells run on the three-node cluster (compat_cluster_test.go).
	cluster bool
	// origination cells run all at once, apart from the other columns,
	// with clients that hold no credentials (compat_origination_test.go);
	// run is not used.
	origination bool
	// stitch cells produce through one kproxy and consume through
	// another, checking the trace in Jaeger (compat_stitch_test.go).
	stitch bool
	// governance cells go through a kproxy with require rules and the
	// audit log on (compat_governance_test.go).
	governance bool
	// rack cells go through the cluster-mode kproxies of the rack column,
	// with and without proxy.client_rack (compat_rack_test.go).
	rack bool
	// clientMetrics cells go through the client-metrics column's kproxy,
	// which answers KIP-714 itself (compat_clientmetrics_test.go).
	clientMetrics bool
	// narrow, when set, is what a cell of the library leaves out of the
	// scenario for something it lacks: the cell's note when it passes.
	narrow func(d kclients.Driver) string
	// apis must each have passed through kproxy during the proxied run:
	// proof that the client did the scenario's work through kproxy.
	apis []string
	run  func(c *cell) error
}

func (s scenario) unsupported(d kclients.Driver) string {
	for _, f := range s.needs {
		if why := d.Unsupported(f); why != "" {
			return why
		}
	}
	if s.name == "perf-tools" {
		if _, ok := d.(kclients.PerfDriver); !ok {
			return "ships no load tools" // an in-process Go driver
		}
	}
	return ""
}

// narrowed is the note of a passed cell of s with d: what it left out.
func (s scenario) narrowed(d kclients.Driver) string {
	if s.narrow == nil {
		return ""
	}
	return s.narrow(d)
}

// compatScenarios are the matrix columns, in order.
var compatScenarios = []scenario{
	{name: "produce-consume", core: true, apis: []string{"Produce", "Fetch", "JoinGroup", "OffsetCommit"}, run: func(c *cell) error { return c.roundTrip("", "none", "all") }},
	{name: "gzip", apis: []string{"Produce", "Fetch"}, needs: []kclients.Feature{kclients.Gzip}, run: func(c *cell) error { return c.roundTrip("", "gzip", "all") }},
	{name: "snappy", apis: []string{"Produce", "Fetch"}, needs: []kclients.Feature{kclients.Snappy}, run: func(c *cell) error { return c.roundTrip("", "snappy", "all") }},
	{name: "lz4", apis: []string{"Produce", "Fetch"}, needs: []kclients.Feature{kclients.LZ4}, run: func(c *cell) error { return c.roundTrip("", "lz4", "all") }},
	{name: "zstd", apis: []string{"Produce", "Fetch"}, needs: []kclients.Feature{kclients.Zstd}, core: true, run: func(c *cell) error { return c.roundTrip("", "zstd", "all") }},
	{name: "acks=0", apis: []string{"Produce", "Fetch"}, needs: []kclients.Feature{kclients.Acks0}, run: func(c *cell) error { return c.roundTrip("", "none", "0") }},
	{name: "rebalance", apis: []string{"JoinGroup", "SyncGroup", "Fetch"}, needs: []kclients.Feature{kclients.Rebalance}, core: true, run: (*cell).rebalance},
	{name: "kip848", apis: []string{"ConsumerGroupHeartbeat", "Fetch"}, needs: []kclients.Feature{kclients.KIP848}, run: (*cell).kip848},
	{name: "transactions", apis: []string{"InitProducerId", "EndTxn", "Produce", "Fetch"}, needs: []kclients.Feature{kclients.Transactions}, core: true, run: (*cell).transactions},
	{name: "sasl-plain", sasl: "PLAIN", apis: []string{"SaslHandshake", "SaslAuthenticate", "Produce", "Fetch"}, needs: []kclients.Feature{kclients.SASLPlain}, run: func(c *cell) error { return c.roundTrip("PLAIN", "none", "all") }},
	{name: "sasl-scram512", sasl: "SCRAM-SHA-512", apis: []string{"SaslHandshake", "SaslAuthenticate", "Produce", "Fetch"}, needs: []kclients.Feature{kclients.SASLScram}, core: true, run: func(c *cell) error { return c.roundTrip("SCRAM-SHA-512", "none", "all") }},
	{name: "tls", tls: "tls", core: true, apis: []string{"Produce", "Fetch", "JoinGroup"}, run: func(c *cell) error { return c.roundTrip("", "none", "all") }},
	{name: "mtls", tls: "mtls", apis: []string{"Produce", "Fetch", "JoinGroup"}, run: func(c *cell) error { return c.roundTrip("", "none", "all") }},
	{name: "cluster", cluster: true, apis: []string{"Metadata", "Produce", "Fetch", "FindCoordinator", "JoinGroup"}, run: func(c *cell) error { return c.roundTrip("", "none", "all") }},
	{name: "sasl-origination", origination: true},
	{name: "oauth", origination: true},
	{name: "trace-stitch", stitch: true, apis: []string{"Produce"}, run: (*cell).traceStitch},
	{name: "admin", apis: []string{"CreateTopics", "DeleteTopics"}, needs: []kclients.Feature{kclients.Admin}, core: true, run: (*cell).admin},
	{name: "governance", governance: true, apis: []string{"Produce", "Fetch"}, needs: []kclients.Feature{kclients.Acks1}, narrow: governanceNote, run: (*cell).governanceCell},
	{name: "rack", rack: true, apis: []string{"Fetch"}, needs: []kclients.Feature{kclients.RackFetch}, run: (*cell).rackCell},
	{name: "client-metrics", clientMetrics: true, apis: []string{"GetTelemetrySubscriptions", "PushTelemetry"}, needs: []kclients.Feature{kclients.ClientMetrics}, run: (*cell).clientMetricsCell},
	{name: "perf-tools", apis: []string{"Produce", "Fetch"}, needs: []kclients.Feature{kclients.PerfTools}, run: (*cell).perf},
}

// codecIDs are the compression codec ids of a record batch's attributes.
var codecIDs = map[string]int8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// records are n keyed records of varied length, tagged so that records of
// different cells never look alike.
func records(tag string, n int) []kclients.Record {
	recs := make([]kclients.Record, n)
	for i := range recs {
		v := strings.Repeat(fmt.Sprintf("%s:%d|", tag, i), 1+i%23)
		recs[i] = kclients.Record{Key: fmt.Sprintf("%s-%05d", tag, i), Value: v}
	}
	return recs
}

// digest is an order-free sha256 over key and value of recs, for the log.
func digest(recs []kclients.Record) string {
	lines := make([]string, len(recs))
	for i, r := range recs {
		lines[i] = r.Key + "\t" + r.Value
	}
	sort.Strings(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:8])
}

// check compares what a consumer received with what was produced: every
// record arrives, byte-equal; with once, exactly once; none of forbidden
// arrives. It returns the digest of what arrived.
func check(want []kclients.Record, got []kclients.Delivered, once bool, forbidden []kclients.Record) (string, error) {
	wantVal := make(map[string]string, len(want))
	for _, r := range want {
		wantVal[r.Key] = r.Value
	}
	bad := make(map[string]bool, len(forbidden))
	for _, r := range forbidden {
		bad[r.Key] = true
	}
	count := map[string]int{}
	var problems []string
	note := func(format string, a ...any) {
		if len(problems) < 5 {
			problems = append(problems, fmt.Sprintf(format, a...))
		}
	}
	var arrived []kclients.Record
	for _, d := range got {
		switch v, ok := wantVal[d.Key]; {
		case bad[d.Key]:
			note("record %s of an aborted transaction was delivered", d.Key)
		case !ok:
			note("unexpected record %q", d.Key)
		case v != d.Value:
			note("record %s: value differs (%d bytes, want %d)", d.Key, len(d.Value), len(v))
		default:
			if count[d.Key] == 0 {
				arrived = append(arrived, kclients.Record{Key: d.Key, Value: d.Value})
			}
			count[d.Key]++
		}
	}
	missing, dups := 0, 0
	for k := range wantVal {
		switch n := count[k]; {
		case n == 0:
			missing++
		case n > 1:
			dups += n - 1
		}
	}
	if missing > 0 {
		note("%d of %d records missing", missing, len(want))
	}
	if once && dups > 0 {
		note("%d duplicate deliveries", dups)
	}
	sum := digest(arrived)
	if len(problems) > 0 {
		return sum, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return sum, nil
}

// roundTrip produces the cell's records with compression and acks, then
// consumes them by group: each must arrive once, byte-equal.
func (c *cell) roundTrip(sasl, compression, acks string) error {
	host := c.createTopic()
	want := records(c.topic, compatRecords)
	ctx, cancel := c.ctx()
	defer cancel()
	var got []kclients.Delivered
	err := c.watched(func() error {
		po := kclients.ProduceOpts{Conn: c.conn(sasl), Topic: c.topic, Acks: acks, Compression: compression}
		if err := c.driver.Produce(ctx, po, want); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		var err error
		got, err = c.driver.Consume(ctx, kclients.ConsumeOpts{Conn: c.conn(sasl), Topic: c.topic, Group: c.topic,
			Count: len(want), Timeout: compatTimeout, Protocol: "classic", Members: 1})
		if err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sum, err := check(want, got, true, nil)
	if err != nil {
		return err
	}
	codecs := host.Codecs(c.t, c.topic)
	if w := codecIDs[compression]; codecs[w] == 0 || len(codecs) != 1 {
		return fmt.Errorf("batches in the log by codec %v, want only codec %d (%s)", codecs, w, compression)
	}
	c.t.Logf("%s: %d records, digest %s, batches by codec %v", c.path.name, len(want), sum, codecs)
	return nil
}

// rebalance runs two members of one group at once. Half the records are
// there before they join; the other half is produced once the group is
// stable with both members holding partitions, so both must receive some.
// Each record arrives at least once (a rebalance may redeliver records
// whose offsets were not committed yet).
func (c *cell) rebalance() error {
	c.env.kafka.CreateTopic(c.t, c.topic, compatParts)
	want := records(c.topic, compatRecords)
	first, second := want[:len(want)/2], want[len(want)/2:]
	ctx, cancel := c.ctx()
	defer cancel()
	po := kclients.ProduceOpts{Conn: c.conn(""), Topic: c.topic, Acks: "all", Compression: "none"}
	if err := c.driver.Produce(ctx, po, first); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	type result struct {
		got []kclients.Delivered
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := c.driver.Consume(ctx, kclients.ConsumeOpts{Conn: c.conn(""), Topic: c.topic, Group: c.topic,
			Count: len(want), Timeout: compatTimeout, Protocol: "classic", Members: 2})
		done <- result{got, err}
	}()
	if err := c.env.kafka.WaitGroupMembers(ctx, c.topic, 2); err != nil {
		cancel()
		<-done
		return err
	}
	if err := c.driver.Produce(ctx, po, second); err != nil {
		return fmt.Errorf("produce after the rebalance: %w", err)
	}
	r := <-done
	if r.err != nil {
		return fmt.Errorf("consume: %w", r.err)
	}
	if _, err := check(want, r.got, false, nil); err != nil {
		return err
	}
	per := map[int]int{}
	for _, d := range r.got {
		per[d.Member]++
	}
	if per[0] == 0 || per[1] == 0 {
		return fmt.Errorf("records per member %v: both members must get partitions", per)
	}
	c.t.Logf("%s: records per member %v", c.path.name, per)
	return nil
}

// kip848 consumes with the consumer group protocol of KIP-848; its apis
// (ConsumerGroupHeartbeat) show that the client did not fall back to the
// classic protocol.
func (c *cell) kip848() error {
	c.env.kafka.CreateTopic(c.t, c.topic, compatParts)
	want := records(c.topic, compatRecords)
	ctx, cancel := c.ctx()
	defer cancel()
	if err := c.driver.Produce(ctx, kclients.ProduceOpts{Conn: c.conn(""), Topic: c.topic, Acks: "all", Compression: "none"}, want); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	got, err := c.driver.Consume(ctx, kclients.ConsumeOpts{Conn: c.conn(""), Topic: c.topic, Group: c.topic,
		Count: len(want), Timeout: compatTimeout, Protocol: "consumer", Members: 1})
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	_, err = check(want, got, true, nil)
	return err
}

// transactions produces an aborted transaction then a committed one; a
// read_committed consumer gets exactly the committed records.
func (c *cell) transactions() error {
	c.env.kafka.CreateTopic(c.t, c.topic, compatParts)
	want := records(c.topic, compatRecords)
	aborted := records(c.topic+"-aborted", compatAborted)
	ctx, cancel := c.ctx()
	defer cancel()
	po := kclients.ProduceOpts{Conn: c.conn(""), Topic: c.topic, Acks: "all", Compression: "none",
		TransactionalID: c.topic, Aborted: aborted}
	if err := c.driver.Produce(ctx, po, want); err != nil {
		return fmt.Errorf("transactional produce: %w", err)
	}
	// The aborted records and the markers must be in the log, or the
	// read_committed check below proves nothing.
	if n := c.env.kafka.EndOffsets(c.t, c.topic); n < int64(len(want)+len(aborted)+2) {
		return fmt.Errorf("the log holds %d offsets, want at least %d records plus 2 transaction markers: the aborted transaction was not written", n, len(want)+len(aborted))
	}
	got, err := c.driver.Consume(ctx, kclients.ConsumeOpts{Conn: c.conn(""), Topic: c.topic, Group: c.topic,
		Count: len(want), Timeout: compatTimeout, Protocol: "classic", ReadCommitted: true, Members: 1})
	if err != nil {
		return fmt.Errorf("read_committed consume: %w", err)
	}
	_, err = check(want, got, true, aborted)
	return err
}

func (c *cell) admin() error {
	ctx, cancel := c.ctx()
	defer cancel()
	return c.driver.Admin(ctx, kclients.AdminOpts{Conn: c.conn(""), Topic: c.topic, Partitions: 3})
}

func (c *cell) perf() error {
	c.env.kafka.CreateTopic(c.t, c.topic, compatParts)
	ctx, cancel := c.ctx()
	defer cancel()
	return c.driver.(kclients.PerfDriver).Perf(ctx, c.conn(""), c.topic, compatPerfRecs, 100)
}
